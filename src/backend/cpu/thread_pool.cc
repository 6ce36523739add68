#include "backend/cpu/thread_pool.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::cpu {

namespace {

// About 50-100 us of polling before a thread sleeps: long enough to bridge the gap between the
// ops of one decode step, short enough not to burn a shared core between steps.
constexpr int kSpinIterations = 20000;
constexpr std::int64_t kChunksPerThread = 4;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins, then sleeps, until `value` no longer equals `old`.
template <typename T>
T wait_for_change(const std::atomic<T>& value, T old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
  }
  for (;;) {
    value.wait(old, std::memory_order_acquire);
    const T now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(static_cast<std::size_t>(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run(std::int64_t n, std::int64_t max_chunks, RangeFn fn, void* context) {
  if (n <= 0) return;
  const std::int64_t threads = num_threads();
  std::int64_t chunks = std::min(n, threads * kChunksPerThread);
  if (max_chunks > 0) chunks = std::min(chunks, max_chunks);
  if (workers_.empty() || chunks == 1) {
    fn(context, 0, n);
    return;
  }
  fn_ = fn;
  context_ = context;
  n_ = n;
  chunk_size_ = (n + chunks - 1) / chunks;
  num_chunks_ = (n + chunk_size_ - 1) / chunk_size_;
  next_chunk_.store(0, std::memory_order_relaxed);
  busy_workers_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  run_chunks();
  // Every worker must check out before the job fields may be rewritten by the next call.
  for (int busy = busy_workers_.load(std::memory_order_acquire); busy != 0;
       busy = busy_workers_.load(std::memory_order_acquire)) {
    wait_for_change(busy_workers_, busy);
  }
}

void ThreadPool::run_chunks() {
  for (;;) {
    const std::int64_t chunk = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= num_chunks_) return;
    const std::int64_t begin = chunk * chunk_size_;
    fn_(context_, begin, std::min(n_, begin + chunk_size_));
  }
}

void ThreadPool::worker_loop() {
  std::uint32_t seen = generation_.load(std::memory_order_acquire);
  for (;;) {
    seen = wait_for_change(generation_, seen);
    if (stopping_.load(std::memory_order_relaxed)) return;
    run_chunks();
    if (busy_workers_.fetch_sub(1, std::memory_order_acq_rel) == 1) busy_workers_.notify_one();
  }
}

}  // namespace pagoda::cpu
