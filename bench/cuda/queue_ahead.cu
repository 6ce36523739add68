// Kernels that keep the GPU busy while the host queues a timed region (bench_util.h's median_ms),
// and an empty one to measure what per-launch timing adds.
#include <chrono>

#include "bench/cuda/queue_ahead.h"
#include "kernels/common/launch.cuh"

namespace pagoda::bench {

namespace {

__device__ __forceinline__ unsigned long long global_timer_ns() {
#if defined(PAGODA_CUDA_EMULATION)
  return static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch() /
                                         std::chrono::nanoseconds(1));
#else
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
#endif
}

__global__ void spin_kernel(unsigned long long nanoseconds) {
  const unsigned long long start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
  }
}

__global__ void empty_kernel() {}

}  // namespace

void launch_spin(double microseconds) {
  (void)kernels::launch_kernel(spin_kernel, dim3(1), dim3(1), 0, nullptr, "spin_kernel",
                               static_cast<unsigned long long>(microseconds * 1e3));
}

void launch_empty() {
  (void)kernels::launch_kernel(empty_kernel, dim3(1), dim3(32), 0, nullptr, "empty_kernel");
}

}  // namespace pagoda::bench
