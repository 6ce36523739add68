// What gpu_bench's parts share: fatal checks, device buffers (random ones from the device's
// generator), event-timed medians (queued behind a spinning kernel: queue_ahead.h) and the RESULT
// line every figure is printed as.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/random_fill.h"
#include "backend/cuda/scalar_type.h"
#include "bench/cuda/queue_ahead.h"
#include "pagoda/status.h"

namespace pagoda::bench {

using cuda::DeviceBuffer;
using cuda::ScalarType;

[[noreturn]] inline void die(const Status& s, const char* where) {
  std::fprintf(stderr, "gpu_bench: %s: %s\n", where, s.to_string().c_str());
  std::exit(1);
}

inline void check(const Status& s, const char* where) {
  if (!s.ok()) die(s, where);
}

inline DeviceBuffer alloc(std::size_t bytes) {
  auto b = DeviceBuffer::allocate(bytes);
  if (!b.ok()) die(b.status(), "allocate");
  return std::move(*b);
}

inline DeviceBuffer random_buffer(std::int64_t n, ScalarType type, std::uint64_t seed,
                                  float low = -1.0f, float high = 1.0f) {
  DeviceBuffer b = alloc(static_cast<std::size_t>(n) * cuda::scalar_type_size(type));
  check(cuda::fill_uniform(b.data(), n, type, low, high, seed, nullptr), "fill");
  return b;
}

// Long enough for the host to queue a timed region's launches and events behind it (a launch
// took ~10 us on the lent machines' gVisor, so 20 of any kernel fit with room to spare).
constexpr double kQueueAheadUs = 3000.0;

// Median milliseconds of `repeats` runs of `fn` after `warmup` runs, on the default stream, each
// between two events. The runs and events are queued behind a spinning kernel, so they run back
// to back on the GPU: a run's time is the GPU's, as inside a CUDA graph, without the host's
// launch latency (through run 29 each run was queued on an idle GPU and timed with that latency;
// `launch_latency_us` measures it). A `fn` that synchronizes with the host still times as before.
inline double median_ms(const std::function<void(int)>& fn, int warmup = 3, int repeats = 20) {
  for (int i = 0; i < warmup; ++i) fn(i);
  check(cuda::cuda_status(cudaDeviceSynchronize(), "sync"), "warm-up");
  std::vector<cudaEvent_t> events(static_cast<std::size_t>(repeats) + 1);
  for (cudaEvent_t& e : events) cudaEventCreate(&e);
  launch_spin(kQueueAheadUs);
  cudaEventRecord(events[0]);
  for (int i = 0; i < repeats; ++i) {
    fn(warmup + i);
    cudaEventRecord(events[static_cast<std::size_t>(i) + 1]);
  }
  check(cuda::check_launch("timed region"), "timed region");
  // The spin must outlast the queueing, or the later runs time the host's latency again. A
  // query that finds it still running leaves "not ready" as the last error (PyTorch clears it
  // the same way).
  if (cudaEventQuery(events[0]) == cudaErrorNotReady) {
    (void)cudaGetLastError();
  } else {
    std::fprintf(stderr,
                 "gpu_bench: queueing %d runs took longer than the %.0f us spin: these "
                 "times include launch latency\n",
                 repeats, kQueueAheadUs);
  }
  check(cuda::cuda_status(cudaEventSynchronize(events.back()), "sync"), "timed region");
  std::vector<double> times;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, events[i], events[i + 1]);
    times.push_back(ms);
  }
  for (cudaEvent_t& e : events) cudaEventDestroy(e);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// What timing each launch on an idle GPU adds: the median of an empty kernel timed that way
// (run 29's method) less the same kernel queued back to back (median_ms's), in microseconds.
inline double launch_latency_us() {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> idle;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(start);
    launch_empty();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    idle.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(idle.begin(), idle.end());
  const double queued_ms = median_ms([](int) { launch_empty(); });
  return (idle[idle.size() / 2] - queued_ms) * 1e3;
}

inline void result(const char* name, double value, const char* unit, double ratio,
                   const char* goal) {
  std::printf("RESULT %-44s %12.3f %-8s %7.3f  %s\n", name, value, unit, ratio, goal);
  std::fflush(stdout);
}

/// The same-run ceilings every kernel figure is a ratio to (gpu_bench kernels measures them).
struct Ceilings {
  double bandwidth_gbs = 0.0;  // B
  double tflops = 0.0;         // F
};

// y [m, n] = x [m, k] w [n, k]^T in BF16 through cuBLASLt: the baseline every GEMM figure is
// a ratio to.
inline void bf16_linear(cuda::BlasLt& blas, const void* x, const void* w, void* y, std::int64_t m,
                        std::int64_t n, std::int64_t k, const char* what) {
  check(blas.linear({.x = x,
                     .w = w,
                     .y = y,
                     .m = m,
                     .n = n,
                     .k = k,
                     .input_type = ScalarType::kBF16,
                     .output_type = ScalarType::kBF16},
                    nullptr),
        what);
}

}  // namespace pagoda::bench
