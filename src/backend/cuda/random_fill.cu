#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cuda_status.h"
#include "backend/cuda/random_fill.h"
#include "backend/random_fill_draw.h"
#include "kernels/common/launch.cuh"

namespace pagoda::cuda {

namespace {

template <typename T>
__device__ T from_float(float x);
template <>
__device__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T>
__global__ void fill_uniform_kernel(T* dst, std::int64_t n, float low, float scale,
                                    std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    dst[i] = from_float<T>(random_fill_value(seed, static_cast<std::uint64_t>(i), low, scale));
  }
}

template <typename T>
Status fill(void* dst, std::int64_t n, float low, float high, std::uint64_t seed,
            cudaStream_t stream) {
  constexpr int kThreads = 256;
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65536);
  return kernels::launch_kernel(fill_uniform_kernel<T>, static_cast<unsigned>(blocks), kThreads, 0,
                                stream, "fill_uniform_kernel", static_cast<T*>(dst), n, low,
                                high - low, seed);
}

}  // namespace

Status fill_uniform(void* dst, std::int64_t n, ScalarType type, float low, float high,
                    std::uint64_t seed, cudaStream_t stream) {
  if (n < 0 || (n > 0 && dst == nullptr)) return invalid_argument("fill_uniform: bad buffer");
  if (n == 0) return Status::ok_status();
  switch (type) {
    case ScalarType::kF32: return fill<float>(dst, n, low, high, seed, stream);
    case ScalarType::kF16: return fill<__half>(dst, n, low, high, seed, stream);
    case ScalarType::kBF16: return fill<__nv_bfloat16>(dst, n, low, high, seed, stream);
  }
  return invalid_argument("fill_uniform: unknown type");
}

}  // namespace pagoda::cuda
