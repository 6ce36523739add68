// Gated MLP activations over the fused gate_up projection's output: out = act(gate) * up, in
// fp32, rounded once. SiLU (Llama, Qwen) and tanh-GELU (Gemma's GeGLU) share the kernel.
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/activation/gelu_tanh_mul.h"
#include "kernels/activation/silu_mul.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_row_scale.cuh"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 256;

struct Silu {
  static constexpr const char* kName = "silu_mul";
  __device__ __forceinline__ static float times(float gate, float up) {
    return gate / (1.0f + expf(-gate)) * up;
  }
};

// 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)), the form the CPU kernel (cpu/gelu_tanh.h) uses;
// expf saturates to inf / 0 at the ends, giving -0 and g.
struct GeluTanh {
  static constexpr const char* kName = "gelu_tanh_mul";
  __device__ __forceinline__ static float times(float gate, float up) {
    constexpr float kMinusTwoSqrt2OverPi = -1.5957691216057308f;
    constexpr float kCubic = 0.044715f;
    const float inner = gate + kCubic * gate * gate * gate;
    return gate / (1.0f + expf(kMinusTwoSqrt2OverPi * inner)) * up;
  }
};

// grid (tokens, column tiles): reads gate and up once, writes out once.
template <typename Act, typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    gated_activation_kernel(const T* __restrict__ gate_up, std::int64_t row_stride,
                            T* __restrict__ out, std::int64_t width) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t token = blockIdx.x;
  const T* gate = gate_up + token * row_stride;
  const T* up = gate + width;
  T* dst = out + token * width;
  constexpr int kStep = kVector ? Pack<T>::kSize : 1;
  const std::int64_t i = (static_cast<std::int64_t>(blockIdx.y) * kThreads + threadIdx.x) * kStep;
  if (i >= width) return;
  if constexpr (kVector) {
    const Pack<T> g = load_pack(gate + i);
    const Pack<T> u = load_pack(up + i);
    Pack<T> o;
    for (int j = 0; j < kStep; ++j) {
      o.v[j] = from_float<T>(Act::times(to_float(g.v[j]), to_float(u.v[j])));
    }
    store_pack(dst + i, o);
  } else {
    dst[i] = from_float<T>(Act::times(to_float(gate[i]), to_float(up[i])));
  }
}

// With an FP8 output the row's amax must be known before any code: one block per token writes
// out, taking the amax of the values as stored, then re-reads its own outputs into codes (as
// the RMSNorm kernel's FP8 output does).
template <typename Act, typename T, bool kVector>
__global__ void __launch_bounds__(kThreads)
    gated_activation_fp8_kernel(const T* __restrict__ gate_up, std::int64_t row_stride,
                                T* __restrict__ out, std::int64_t width,
                                std::uint8_t* __restrict__ out_fp8,
                                float* __restrict__ out_fp8_scales) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t token = blockIdx.x;
  const T* gate = gate_up + token * row_stride;
  const T* up = gate + width;
  T* dst = out + token * width;
  constexpr int kStep = kVector ? Pack<T>::kSize : 1;
  float amax = 0.0f;
  for (std::int64_t i = threadIdx.x * kStep; i < width; i += kThreads * kStep) {
    if constexpr (kVector) {
      const Pack<T> g = load_pack(gate + i);
      const Pack<T> u = load_pack(up + i);
      Pack<T> o;
      for (int j = 0; j < kStep; ++j) {
        o.v[j] = from_float<T>(Act::times(to_float(g.v[j]), to_float(u.v[j])));
        amax = fmaxf(amax, fabsf(to_float(o.v[j])));
      }
      store_pack(dst + i, o);
    } else {
      dst[i] = from_float<T>(Act::times(to_float(gate[i]), to_float(up[i])));
      amax = fmaxf(amax, fabsf(to_float(dst[i])));
    }
  }
  const Fp8RowScale s = fp8_row_scale(block_max(amax));
  std::uint8_t* codes = out_fp8 + token * width;
  for (std::int64_t i = threadIdx.x * kStep; i < width; i += kThreads * kStep) {
    const std::int64_t end = i + kStep < width ? i + kStep : width;
    for (std::int64_t e = i; e < end; ++e) codes[e] = fp8_code(to_float(dst[e]), s.inverse);
  }
  if (threadIdx.x == 0) out_fp8_scales[token] = s.scale;
}

template <typename Act>
Status launch_gated_activation(const SiluMulParams& p, cudaStream_t stream) {
  constexpr const char* kOp = Act::kName;
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.num_tokens <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(p.width > 0 && p.gate_up_row_stride >= 2 * p.width, kOp);
  PAGODA_KERNEL_REQUIRE(p.width <= 65535LL * kThreads, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.gate_up != nullptr && p.out != nullptr, kOp);
  PAGODA_KERNEL_REQUIRE((p.out_fp8 == nullptr) == (p.out_fp8_scales == nullptr), kOp);
  PAGODA_KERNEL_REQUIRE(p.out_fp8 == nullptr || p.dtype != cuda::ScalarType::kF32, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    constexpr int kPack = Pack<T>::kSize;
    const bool vector = p.width % kPack == 0 && p.gate_up_row_stride % kPack == 0 &&
                        is_aligned16(p.gate_up) && is_aligned16(p.out);
    if (p.out_fp8 != nullptr) {
      return launch_pdl(vector ? gated_activation_fp8_kernel<Act, T, true>
                               : gated_activation_fp8_kernel<Act, T, false>,
                        dim3(static_cast<unsigned>(p.num_tokens)), dim3(kThreads), 0, stream, kOp,
                        static_cast<const T*>(p.gate_up), p.gate_up_row_stride,
                        static_cast<T*>(p.out), p.width, p.out_fp8, p.out_fp8_scales);
    }
    const std::int64_t per_block = kThreads * (vector ? kPack : 1);
    const dim3 grid(static_cast<unsigned>(p.num_tokens),
                    static_cast<unsigned>((p.width + per_block - 1) / per_block));
    const auto* gate_up = static_cast<const T*>(p.gate_up);
    auto* out = static_cast<T*>(p.out);
    return launch_pdl(
        vector ? gated_activation_kernel<Act, T, true> : gated_activation_kernel<Act, T, false>,
        grid, dim3(kThreads), 0, stream, kOp, gate_up, p.gate_up_row_stride, out, p.width);
  });
}

}  // namespace

Status launch_silu_mul(const SiluMulParams& p, cudaStream_t stream) {
  return launch_gated_activation<Silu>(p, stream);
}

Status launch_gelu_tanh_mul(const SiluMulParams& p, cudaStream_t stream) {
  return launch_gated_activation<GeluTanh>(p, stream);
}

}  // namespace pagoda::kernels
