#include "quant/load_threads.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace pagoda::quant {

int load_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

// Plain threads, not cpu::ThreadPool: the CPU backend links this library, and a few thread
// starts per matrix cost nothing beside the matrix.
void parallel_ranges(std::int64_t n, std::int64_t grain,
                     const std::function<void(std::int64_t, std::int64_t)>& fn, int num_threads) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t num_ranges = (n + grain - 1) / grain;
  std::atomic<std::int64_t> next{0};
  const auto worker = [&] {
    for (std::int64_t r; (r = next.fetch_add(1)) < num_ranges;) {
      fn(r * grain, std::min(n, (r + 1) * grain));
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t t = 1; t < std::min<std::int64_t>(num_threads, num_ranges); ++t) {
    threads.emplace_back(worker);
  }
  worker();
  for (std::thread& t : threads) t.join();
}

}  // namespace pagoda::quant
