#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/gemm/fp8_scale_epilogue.h"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 4;

// One thread per 4 consecutive outputs of a row: float4 loads of the sums where the row's
// start is 16-byte aligned (n % 4 == 0), scalar otherwise.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8_scale_epilogue_kernel(const float* __restrict__ sums, const float* __restrict__ x_scales,
                              const float* __restrict__ w_scales, const T* __restrict__ bias,
                              T* __restrict__ y, int n, int quads_per_row) {
  const int row = static_cast<int>(blockIdx.y);
  const int quad = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (quad >= quads_per_row) return;
  const int col0 = quad * kPerThread;
  const std::size_t at = static_cast<std::size_t>(row) * n + col0;
  const float sx = x_scales[row];
  float v[kPerThread];
  if (n % kPerThread == 0) {
    const float4 s = *reinterpret_cast<const float4*>(sums + at);
    v[0] = s.x, v[1] = s.y, v[2] = s.z, v[3] = s.w;
  } else {
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) v[e] = col0 + e < n ? sums[at + e] : 0.0f;
  }
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const int col = col0 + e;
    if (col >= n) break;
    float out = v[e] * sx * w_scales[col];
    if (bias != nullptr) out += to_float(bias[col]);
    y[at + e] = from_float<T>(out);
  }
}

template <typename T>
Status launch_typed(const Fp8ScaleEpilogueParams& p, cudaStream_t stream) {
  const int quads = static_cast<int>((p.n + kPerThread - 1) / kPerThread);
  const dim3 grid(static_cast<unsigned>((quads + kThreads - 1) / kThreads),
                  static_cast<unsigned>(p.m));
  return launch_kernel(fp8_scale_epilogue_kernel<T>, grid, kThreads, 0, stream,
                       "fp8_scale_epilogue_kernel", p.sums, p.x_scales, p.w_scales,
                       static_cast<const T*>(p.bias), static_cast<T*>(p.y), static_cast<int>(p.n),
                       quads);
}

}  // namespace

Status launch_fp8_scale_epilogue(const Fp8ScaleEpilogueParams& p, cudaStream_t stream) {
  if (p.m < 0 || p.n < 1 || p.m > 65535 || p.n > (1 << 30) || p.sums == nullptr ||
      p.x_scales == nullptr || p.w_scales == nullptr || p.y == nullptr) {
    return invalid_argument("fp8 scale epilogue: bad shape or missing operand");
  }
  if (p.m == 0) return Status::ok_status();
  switch (p.dtype) {
    case cuda::ScalarType::kBF16: return launch_typed<__nv_bfloat16>(p, stream);
    case cuda::ScalarType::kF16: return launch_typed<__half>(p, stream);
    default: return invalid_argument("fp8 scale epilogue: the output must be bf16 or f16");
  }
}

}  // namespace pagoda::kernels
