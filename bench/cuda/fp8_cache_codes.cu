#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "bench/cuda/fp8_cache_codes.h"
#include "kernels/common/launch.cuh"

namespace pagoda::bench {

namespace {

__global__ void e4m3_codes_kernel(const __nv_bfloat16* __restrict__ values,
                                  std::uint8_t* __restrict__ codes, std::int64_t n) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    codes[i] = __nv_cvt_float_to_fp8(__bfloat162float(values[i]), __NV_SATFINITE, __NV_E4M3);
  }
}

}  // namespace

Status e4m3_codes_of_bf16(const void* values, std::uint8_t* codes, std::int64_t n) {
  return kernels::launch_kernel(e4m3_codes_kernel, dim3(1024), dim3(256), 0, nullptr,
                                "e4m3_codes_kernel", static_cast<const __nv_bfloat16*>(values),
                                codes, n);
}

}  // namespace pagoda::bench
