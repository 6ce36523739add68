#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_row_scale.cuh"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 256;

// One block per token. Pass 1 adds the residual (writing it back) and sums squares; pass 2
// re-reads the row, which a block just touched, from L1/L2 rather than HBM. With an FP8 output,
// pass 2 also takes the row's amax and pass 3 re-reads each thread's own outputs into codes.
template <typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const T* __restrict__ x, T* __restrict__ residual, const T* __restrict__ weight,
                    T* __restrict__ out, std::int64_t hidden, float eps,
                    std::uint8_t* __restrict__ out_fp8, float* __restrict__ out_fp8_scales) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * hidden;
  const T* in = x + row;
  T* res = residual != nullptr ? residual + row : nullptr;
  const T* source = res != nullptr ? res : in;
  constexpr int kStep = kVector ? Pack<T>::kSize : 1;

  float sum_sq = 0.0f;
  for (std::int64_t i = threadIdx.x * kStep; i < hidden; i += kThreads * kStep) {
    if constexpr (kVector) {
      Pack<T> v = load_pack(in + i);
      if (res != nullptr) {
        const Pack<T> r = load_pack(res + i);
        for (int j = 0; j < kStep; ++j) {
          v.v[j] = from_float<T>(to_float(r.v[j]) + to_float(v.v[j]));
        }
        store_pack(res + i, v);
      }
      for (int j = 0; j < kStep; ++j) {
        const float f = to_float(v.v[j]);
        sum_sq += f * f;
      }
    } else {
      T v = in[i];
      if (res != nullptr) {
        v = from_float<T>(to_float(res[i]) + to_float(v));
        res[i] = v;
      }
      const float f = to_float(v);
      sum_sq += f * f;
    }
  }
  const float total = block_sum(sum_sq);
  const float inv_rms = rsqrtf(total / static_cast<float>(hidden) + eps);

  T* dst = out + row;
  float amax = 0.0f;
  for (std::int64_t i = threadIdx.x * kStep; i < hidden; i += kThreads * kStep) {
    if constexpr (kVector) {
      const Pack<T> v = load_pack(source + i);
      const Pack<T> w = load_pack(weight + i);
      Pack<T> o;
      for (int j = 0; j < kStep; ++j) {
        o.v[j] = from_float<T>(to_float(w.v[j]) * (to_float(v.v[j]) * inv_rms));
        amax = fmaxf(amax, fabsf(to_float(o.v[j])));
      }
      store_pack(dst + i, o);
    } else {
      dst[i] = from_float<T>(to_float(weight[i]) * (to_float(source[i]) * inv_rms));
      amax = fmaxf(amax, fabsf(to_float(dst[i])));
    }
  }
  if (out_fp8 == nullptr) return;
  const Fp8RowScale s = fp8_row_scale(block_max(amax));
  for (std::int64_t i = threadIdx.x * kStep; i < hidden; i += kThreads * kStep) {
    const std::int64_t end = i + kStep < hidden ? i + kStep : hidden;
    for (std::int64_t e = i; e < end; ++e) out_fp8[row + e] = fp8_code(to_float(dst[e]), s.inverse);
  }
  if (threadIdx.x == 0) out_fp8_scales[blockIdx.x] = s.scale;
}

}  // namespace

Status launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "rms_norm";
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.hidden > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.num_tokens <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(p.eps >= 0.0f, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.x != nullptr && p.weight != nullptr && p.out != nullptr, kOp);
  PAGODA_KERNEL_REQUIRE(p.out != p.x && p.out != p.residual, kOp);
  PAGODA_KERNEL_REQUIRE((p.out_fp8 == nullptr) == (p.out_fp8_scales == nullptr), kOp);
  PAGODA_KERNEL_REQUIRE(p.out_fp8 == nullptr || p.dtype != cuda::ScalarType::kF32, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    const bool vector = p.hidden % Pack<T>::kSize == 0 && is_aligned16(p.x) &&
                        is_aligned16(p.weight) && is_aligned16(p.out) && is_aligned16(p.residual);
    const dim3 grid(static_cast<unsigned>(p.num_tokens));
    const auto* x = static_cast<const T*>(p.x);
    auto* residual = static_cast<T*>(p.residual);
    const auto* weight = static_cast<const T*>(p.weight);
    auto* out = static_cast<T*>(p.out);
    return launch_pdl(vector ? rms_norm_kernel<T, true> : rms_norm_kernel<T, false>, grid,
                      dim3(kThreads), 0, stream, "rms_norm_kernel", x, residual, weight, out,
                      p.hidden, p.eps, p.out_fp8, p.out_fp8_scales);
  });
}

}  // namespace pagoda::kernels
