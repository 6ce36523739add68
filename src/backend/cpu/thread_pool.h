// A fixed pool of worker threads for data-parallel ops. A decode step calls parallel_for about ten
// times per layer, so dispatch is a generation counter that parked workers spin on for a short
// while before sleeping on a futex: back-to-back calls never pay a wake-up, and a call with no
// sleeper pays no system call.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace pagoda::cpu {

/// Runs index ranges on a fixed set of threads; the calling thread takes part in every call.
class ThreadPool {
 public:
  /// `num_threads` counts the caller; 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Threads that run work, the caller included.
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls fn(begin, end) on disjoint ranges covering [0, n), split into at most `max_chunks`
  /// ranges (0: a few per thread, so a thread slowed by a neighbour's process does not stall the
  /// rest). Returns when every range is done. Not reentrant: fn must not call parallel_for.
  template <typename Fn>
  void parallel_for(std::int64_t n, Fn&& fn, std::int64_t max_chunks = 0) {
    using F = std::remove_reference_t<Fn>;
    run(
        n, max_chunks,
        [](void* context, std::int64_t begin, std::int64_t end) {
          (*static_cast<F*>(context))(begin, end);
        },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using RangeFn = void (*)(void* context, std::int64_t begin, std::int64_t end);

  void run(std::int64_t n, std::int64_t max_chunks, RangeFn fn, void* context);
  void worker_loop();
  // Claims and runs one chunk of the current job; false when none is left.
  bool run_one_chunk();

  std::vector<std::thread> workers_;
  // The current job; rewritten by the caller only after every claimed chunk is done.
  RangeFn fn_ = nullptr;
  void* context_ = nullptr;
  std::int64_t n_ = 0;
  std::int64_t chunk_size_ = 0;
  std::uint64_t job_id_ = 0;
  // [63:32] job id (low bits) | [31:16] number of chunks | [15:0] next unclaimed chunk.
  std::atomic<std::uint64_t> job_state_{0};
  std::atomic<std::uint32_t> done_chunks_{0};
  std::atomic<std::uint32_t> generation_{0};  // Bumped per job and at shutdown; the futex word.
  std::atomic<std::uint32_t> sleepers_{0};    // Threads in (or entering) a futex wait.
  std::atomic<bool> stopping_{false};
};

}  // namespace pagoda::cpu
