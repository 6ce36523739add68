#include "backend/cpu/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "common/check.h"

namespace pagoda::cpu {

namespace {

// About 50-100 us of polling before a thread sleeps: long enough to bridge the gap between the
// ops of one decode step, short enough not to burn a shared core between steps.
constexpr int kSpinIterations = 20000;
constexpr std::int64_t kEvenChunksPerThread = 4;
// The smallest guided range is n / (threads x this).
constexpr std::int64_t kGuidedFloorDivisor = 16;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Raw futex rather than std::atomic::wait: libstdc++ 12's notify can lose a wake-up against a
// concurrent wait (seen here as a pool deadlock), and it cannot skip the syscall when nobody
// sleeps.
std::uint32_t* futex_word(std::atomic<std::uint32_t>& value) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  return reinterpret_cast<std::uint32_t*>(&value);
}

// Spins, then sleeps, until `value` no longer equals `old`. A sleeper registers in `sleepers`
// before its final check; wake() reads `sleepers` after its store (both seq_cst), so either the
// sleeper sees the new value or the waker sees the sleeper.
std::uint32_t wait_for_change(std::atomic<std::uint32_t>& value, std::uint32_t old,
                              std::atomic<std::uint32_t>& sleepers) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const std::uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
  }
  for (;;) {
    sleepers.fetch_add(1);
    if (value.load() == old) {
      syscall(SYS_futex, futex_word(value), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
    }
    sleepers.fetch_sub(1);
    const std::uint32_t now = value.load(std::memory_order_acquire);
    if (now != old) return now;
  }
}

void wake(std::atomic<std::uint32_t>& value, const std::atomic<std::uint32_t>& sleepers) {
  if (sleepers.load() != 0) {
    syscall(SYS_futex, futex_word(value), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(static_cast<std::size_t>(num_threads - 1));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_relaxed);
  generation_.fetch_add(1);
  wake(generation_, sleepers_);
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run(std::int64_t n, Schedule schedule, RangeFn fn, void* context) {
  if (n <= 0) return;
  const std::int64_t threads = num_threads();
  if (workers_.empty() || n == 1) {
    fn(context, 0, n);
    return;
  }
  const std::int64_t max_chunks = static_cast<std::int64_t>(bounds_.size()) - 1;
  // kEven: n / (kEvenChunksPerThread x threads) each. kGuided: a 1/(2 x threads) share of what
  // is left, down to a floor so a large range is not cut into many tiny claims at its end.
  const std::int64_t even =
      (n + threads * kEvenChunksPerThread - 1) / (threads * kEvenChunksPerThread);
  const std::int64_t floor = std::max<std::int64_t>(1, n / (threads * kGuidedFloorDivisor));
  std::int64_t num_chunks = 0;
  for (std::int64_t begin = 0; begin < n; ++num_chunks) {
    bounds_[num_chunks] = begin;
    const std::int64_t left = n - begin;
    std::int64_t size = schedule == Schedule::kEven
                            ? even
                            : std::max(floor, (left + 2 * threads - 1) / (2 * threads));
    if (num_chunks + 1 == max_chunks) size = left;
    begin += std::min(size, left);
  }
  bounds_[num_chunks] = n;
  fn_ = fn;
  context_ = context;
  done_chunks_.store(0, std::memory_order_relaxed);
  ++job_id_;
  job_state_.store((job_id_ << 32) | (static_cast<std::uint64_t>(num_chunks) << 16),
                   std::memory_order_release);
  generation_.fetch_add(1);
  wake(generation_, sleepers_);
  while (run_one_chunk()) {
  }
  // Only chunks some thread claimed are waited for: a worker the OS has not scheduled yet simply
  // finds the job drained when it wakes.
  const auto total = static_cast<std::uint32_t>(num_chunks);
  for (std::uint32_t done = done_chunks_.load(std::memory_order_acquire); done != total;
       done = done_chunks_.load(std::memory_order_acquire)) {
    wait_for_change(done_chunks_, done, sleepers_);
  }
}

bool ThreadPool::run_one_chunk() {
  std::uint64_t state = job_state_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint64_t next = state & 0xFFFF;
    const std::uint64_t count = (state >> 16) & 0xFFFF;
    if (next >= count) return false;
    // Claiming through the whole state word (job id included) means a worker holding a stale
    // snapshot can never take a chunk of a later job; the job fields it reads after a successful
    // claim cannot change before it reports the chunk done.
    if (job_state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire)) {
      fn_(context_, bounds_[next], bounds_[next + 1]);
      if (done_chunks_.fetch_add(1, std::memory_order_acq_rel) + 1 == count) {
        wake(done_chunks_, sleepers_);
      }
      return true;
    }
  }
}

void ThreadPool::worker_loop() {
  // Generation 0 is the constructor's; reading generation_ here instead could already see the
  // first job's bump and then wait for the job after it.
  std::uint32_t seen = 0;
  for (;;) {
    seen = wait_for_change(generation_, seen, sleepers_);
    if (stopping_.load(std::memory_order_relaxed)) return;
    while (run_one_chunk()) {
    }
  }
}

}  // namespace pagoda::cpu
