// Kernels that keep the GPU busy while the host queues a timed region (bench_util.h's median_ms),
// and an empty one to measure what per-launch timing adds.
#include "bench/cuda/queue_ahead.h"

namespace pagoda::bench {

namespace {

__global__ void spin_kernel(unsigned long long nanoseconds) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

__global__ void empty_kernel() {}

}  // namespace

void launch_spin(double microseconds) {
  spin_kernel<<<1, 1>>>(static_cast<unsigned long long>(microseconds * 1e3));
}

void launch_empty() {
  empty_kernel<<<1, 32>>>();
}

}  // namespace pagoda::bench
