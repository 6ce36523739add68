// A fixed pool of worker threads for data-parallel ops. A decode step calls parallel_for about ten
// times per layer, so dispatch is a generation counter that parked workers spin on for a short
// while before sleeping on a futex: back-to-back calls never pay a wake-up, and a call with no
// sleeper pays no system call.
#pragma once

#include <array>
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

  /// How parallel_for cuts [0, n) into the ranges threads claim, in order.
  enum class Schedule {
    /// Shrinking ranges, each 1/(2 x threads) of what is left: few claims, and a thread that
    /// finishes early waits for at most one small range. For compute-bound work.
    kGuided,
    /// Four equal ranges per thread: for bandwidth-bound streams (a single sequence's weight
    /// reads), where every thread runs at the same rate and each extra range boundary costs a
    /// restart of the stream.
    kEven,
  };

  /// Calls fn(begin, end) on disjoint ranges covering [0, n) and returns when every range is
  /// done. Ranges are claimed dynamically, so a thread slowed by a neighbour's process does not
  /// stall the rest. Not reentrant: fn must not call parallel_for.
  template <typename Fn>
  void parallel_for(std::int64_t n, Fn&& fn, Schedule schedule = Schedule::kGuided) {
    using F = std::remove_reference_t<Fn>;
    run(
        n, schedule,
        [](void* context, std::int64_t begin, std::int64_t end) {
          (*static_cast<F*>(context))(begin, end);
        },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using RangeFn = void (*)(void* context, std::int64_t begin, std::int64_t end);

  void run(std::int64_t n, Schedule schedule, RangeFn fn, void* context);
  void worker_loop();
  // Claims and runs one chunk of the current job; false when none is left.
  bool run_one_chunk();

  std::vector<std::thread> workers_;
  // The current job; rewritten by the caller only after every claimed chunk is done.
  RangeFn fn_ = nullptr;
  void* context_ = nullptr;
  std::array<std::int64_t, 129> bounds_{};  // Chunk i is [bounds_[i], bounds_[i + 1]).
  std::uint64_t job_id_ = 0;
  // [63:32] job id (low bits) | [31:16] number of chunks | [15:0] next unclaimed chunk.
  std::atomic<std::uint64_t> job_state_{0};
  std::atomic<std::uint32_t> done_chunks_{0};
  std::atomic<std::uint32_t> generation_{0};  // Bumped per job and at shutdown; the futex word.
  std::atomic<std::uint32_t> sleepers_{0};    // Threads in (or entering) a futex wait.
  std::atomic<bool> stopping_{false};
};

}  // namespace pagoda::cpu
