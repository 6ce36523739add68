// y = x · W^T (+ bias): every linear layer of the model. Activations arrive as fp32; W stays in
// its stored type (F32, F16, BF16, Q8_0, Q4_0, Q4_1; other dequantizable types through a row
// buffer) and is decoded inside the kernel, never converted at load. On AVX2 and AVX-512 CPUs,
// weights of the int16_decodes() types (Q8_0, Q4_*, Q5_*, Q2_K..Q6_K) meet x rounded to int16
// instead (the int16 kernels: matmul_int16_avx512.h on VNNI CPUs, matmul_int16_avx2.h on the rest,
// bit-identical).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "backend/cpu/tensor_view.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu {

/// Which kernel family computes a matmul; kAuto picks by shape, the rest exist for tests and
/// benchmarks.
enum class MatmulKernel : std::uint8_t {
  kAuto,
  kDirect,     ///< Weight blocks decoded into registers, dotted with up to 4 rows of x at once.
  kPacked,     ///< Weights decoded into a per-thread [256, 16] fp32 panel, 6x16 register tiles.
  kBlasPanel,  ///< Weights decoded into a per-thread fp32 panel, multiplied by cblas_sgemm.
  kRowGroup,   ///< 4 weight rows decoded once to fp32, dotted with every row of x in tiles.
  kBroadcast,  ///< x transposed to columns of 16 rows; each decoded weight broadcast into them.
  /// As kBroadcast with x rounded to int16 per 32-column block and integer dot products, in
  /// pieces of up to 32 (AVX-512 VNNI) or 16 (AVX2) rows; int16_decodes() weights, else the fp32
  /// kernel for m. See matmul_int16_avx512.h (the contract) and matmul_int16_avx2.h.
  kBroadcastInt16,
  /// kBroadcastInt16's exact results for 1-8 rows with lanes across weight rows (more rows go to
  /// kBroadcastInt16).
  kDirectInt16,
};

/// The kernel kAuto picks for m rows of x on this CPU. Where cpu_int16_activations() (AVX2 or
/// AVX-512, unless PAGODA_CPU_INT16=0): kDirectInt16 up to 8 rows, kBroadcastInt16 past that, so a
/// row's result never depends on how many rows share the call; x then carries 15 significant
/// bits, not 24. Weights those kernels do not take get fp32_matmul_kernel_for(m).
MatmulKernel matmul_kernel_for(std::int64_t m);

/// The fp32-activation kernel for m rows of x on this CPU.
MatmulKernel fp32_matmul_kernel_for(std::int64_t m);

/// One weight of a fused matmul: y = x · w^T (+ bias).
struct MatmulOutput {
  TensorView w;                 ///< [N, K]
  const float* bias = nullptr;  ///< [N] or nullptr
  float* y = nullptr;           ///< [m, N]
};

/// Most weights one matmul_fused call takes (Q, K and V).
inline constexpr std::size_t kMaxFusedOutputs = 3;

/// y[m, N] = x[m, K] · W[N, K]^T (+ bias[N]).
void matmul(ThreadPool& pool, const float* x /* [m, K] */, std::int64_t m,
            const TensorView& w /* [N, K] */, const float* bias /* [N] or nullptr */,
            float* y /* [m, N] */, MatmulKernel kernel = MatmulKernel::kAuto);

/// Several matmuls of one x (Q/K/V, gate/up: weights with the same K) in one pool dispatch: the
/// rows of all the weights are split across the threads as one range, so the pool waits once.
/// Each output equals what matmul() computes for it with the same kernel.
void matmul_fused(ThreadPool& pool, const float* x /* [m, K] */, std::int64_t m,
                  std::span<const MatmulOutput> outputs, MatmulKernel kernel = MatmulKernel::kAuto);

/// Single-threaded oracle: each weight row through the reference dequantizer, dot products
/// accumulated in double.
void matmul_reference(const float* x /* [m, K] */, std::int64_t m, const TensorView& w /* [N, K] */,
                      const float* bias /* [N] or nullptr */, float* y /* [m, N] */);

/// Whether matmul accepts weights of `dtype`.
bool matmul_supported(DType dtype);

}  // namespace pagoda::cpu
