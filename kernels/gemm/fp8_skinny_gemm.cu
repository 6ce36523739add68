#include <cstdlib>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/fp8_skinny_gemm.h"

namespace pagoda::kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kTileChannels = 16;      // output channels per CTA: the mma's 16 rows
constexpr int kChunk = 16;             // codes per 16-byte load
constexpr int kWarpCols = 4 * kChunk;  // columns of one round: the 4 lanes t of a row
// Both operands enter the mma as 2^-8 times their value (e4m3x4_to_f16 below): the sums come out
// 2^-16 times the codes' products, and this power of two puts them back exactly.
constexpr float kUnscale = 65536.0f;

// Four E4M3 codes (the bytes of `q`) as two f16 pairs, bytes {1, 3} in `odd` and {0, 2} in `even`
// (the lower byte in the low half), each 2^-8 times the code's value: the code's sign goes to bit
// 15 and its 7 other bits to bits 13..7, so E4M3's exponent field (bias 7) becomes f16's (bias 15),
// which divides by 2^8, and its 3 mantissa bits lead f16's; subnormal codes become f16 subnormals,
// exactly. Integer instructions rather than cvt.rn.f16x2.e4m3x2: Hopper converts at a fraction of
// the integer pipe's rate, and at 16 codes per 16-byte load a conversion per pair of codes would
// come close to the memory's pace.
__device__ __forceinline__ void e4m3x4_to_f16(std::uint32_t q, std::uint32_t& odd,
                                              std::uint32_t& even) {
  odd = (q & 0x80008000u) | ((q >> 1) & 0x3F803F80u);
  q <<= 8;
  even = (q & 0x80008000u) | ((q >> 1) & 0x3F803F80u);
}

__device__ __forceinline__ std::uint32_t word(const uint4& v, int s) {
  return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w;
}

// The 16 codes of `row` from column `col` (a multiple of 16): one 16-byte load when every row is
// 16-byte aligned (kVector: k % 16 == 0 and an aligned base), streaming (evict-first) for the
// weights and a plain coherent load for x; else byte loads. Codes past k read as 0. x must not
// go through the non-coherent path (__ldg, or a const __restrict__ parameter): ptxas treats those
// loads as reading memory no kernel writes and hoists them above griddepcontrol.wait, so under
// PDL they read the previous layer's codes (pdl.cuh).
template <bool kVector, bool kStream>
__device__ __forceinline__ uint4 load_chunk(const std::uint8_t* row, int col, int k) {
  if constexpr (kVector) {
    if (col >= k) return make_uint4(0u, 0u, 0u, 0u);
    const auto* p = reinterpret_cast<const uint4*>(row + col);
    if constexpr (kStream) return __ldcs(p);
    return *p;
  } else {
    std::uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int b = 0; b < kChunk; ++b) {
      if (col + b >= k) continue;
      const std::uint8_t code = kStream ? __ldcs(row + col + b) : row[col + b];
      w[b / 4] |= static_cast<std::uint32_t>(code) << (8 * (b % 4));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// A CTA owns 16 output channels (weight rows ch0 .. ch0 + 15) for all m <= 8 kTiles rows of x; its
// 4 warps split k in spans of kRounds x 64 columns (warp w takes spans w, w + 4, w + 8, ...).
// Lane = 4 g + t. Round u of a warp's span starting at s0:
//
//   columns s0 + 64u + ...     0..15      16..31     32..47     48..63
//   W row ch0 + g              lane t=0   lane t=1   lane t=2   lane t=3    -> mma A row g
//   W row ch0 + g + 8          t=0        t=1        t=2        t=3         -> mma A row g + 8
//   x row g (tile 1: g + 8)    t=0        t=1        t=2        t=3         -> mma B column g
//
// each cell 16 codes, one 16-byte load. A lane's 16 codes of a row are four mma k-steps s of 4
// codes (word s of the load). mma.m16n8k16 hands lane t the k indices {2t, 2t+1} (a0, a1, b0) and
// {2t+8, 2t+9} (a2, a3, b1) of a step; which column sits at which k index is free as long as A
// and B agree, so word s's bytes {1, 3} fill the first pair and {0, 2} the second, for W and x
// alike, and the 4 lanes t together cover the step's 16 columns. The accumulators are the mma's D
// tile: channel g (d0, d1) and g + 8 (d2, d3) at x rows 2t, 2t+1 of the tile. Warps meet in
// shared memory, and one thread per output applies the scales.

// What a lane reads: its two weight rows and its kTiles rows of x.
template <int kTiles>
struct LaneRows {
  const std::uint8_t* w[2];
  const std::uint8_t* x[kTiles];
  bool x_live[kTiles];
};

// One span's codes in registers: kRounds rounds of two weight loads and kTiles x loads.
template <int kTiles, int kRounds>
struct SpanCodes {
  uint4 w[kRounds][2];
  uint4 x[kRounds][kTiles];
};

// The weights of the span at `span` (streaming: read once); they do not depend on the kernel
// before, so they may be loaded before pdl_wait.
template <bool kVector, int kTiles, int kRounds>
__device__ __forceinline__ void load_weights(SpanCodes<kTiles, kRounds>& c,
                                             const LaneRows<kTiles>& rows, int span, int t, int k) {
  const int lane_col = span + t * kChunk;
#pragma unroll
  for (int u = 0; u < kRounds; ++u)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      c.w[u][r] = load_chunk<kVector, true>(rows.w[r], lane_col + u * kWarpCols, k);
    }
}

// x's codes of the span: the previous kernel's output, so only after pdl_wait.
template <bool kVector, int kTiles, int kRounds>
__device__ __forceinline__ void load_x(SpanCodes<kTiles, kRounds>& c, const LaneRows<kTiles>& rows,
                                       int span, int t, int k) {
  const int lane_col = span + t * kChunk;
#pragma unroll
  for (int u = 0; u < kRounds; ++u)
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      c.x[u][j] = rows.x_live[j]
                      ? load_chunk<kVector, false>(rows.x[j], lane_col + u * kWarpCols, k)
                      : make_uint4(0u, 0u, 0u, 0u);
    }
}

// acc += the span's products (rounds wholly past k hold zeros and are skipped).
template <int kTiles, int kRounds>
__device__ __forceinline__ void multiply(const SpanCodes<kTiles, kRounds>& c, int span, int k,
                                         float (&acc)[kTiles][4]) {
#pragma unroll
  for (int u = 0; u < kRounds; ++u) {
    if (span + u * kWarpCols >= k) break;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      std::uint32_t a[4];
      e4m3x4_to_f16(word(c.w[u][0], s), a[0], a[2]);
      e4m3x4_to_f16(word(c.w[u][1], s), a[1], a[3]);
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        std::uint32_t b0, b1;
        e4m3x4_to_f16(word(c.x[u][j], s), b0, b1);
        mma_16816<__half>(acc[j], a, b0, b1);
      }
    }
  }
}

// The whole-span loop (Fp8SkinnyVariant::kWholeSpan): per iteration all 16 weight loads of a
// 512-column span are issued before any is used, then the span's math; the next span's loads
// wait for it.
template <bool kVector, int kTiles>
__device__ __forceinline__ void stream_whole_spans(const LaneRows<kTiles>& rows, int warp, int t,
                                                   int k, float (&acc)[kTiles][4]) {
  constexpr int kRounds = 8;
  constexpr int kSpan = kRounds * kWarpCols;
  bool waited = false;
  // `span` is the same for the whole warp (mma.sync needs every lane); lanes differ only in what
  // they load.
  for (int span = warp * kSpan; span < k; span += kWarps * kSpan) {
    SpanCodes<kTiles, kRounds> c;
    load_weights<kVector>(c, rows, span, t, k);
    // The first iteration's weights are in flight while the kernel before finishes.
    if (!waited) {
      pdl_wait();
      waited = true;
    }
    load_x<kVector>(c, rows, span, t, k);
    multiply(c, span, k, acc);
  }
  if (!waited) pdl_wait();  // a warp with no span (k <= its offset) still meets the others
}

// The pipelined loop (Fp8SkinnyVariant::kPipelined): each warp's 512-column spans, the whole-span
// loop's, in two 256-column register stages (a the first half, b the second), the next stage's
// loads issued before the current stage's math, so a warp keeps its loads in flight while it
// multiplies (the same registers as the whole-span loop's one stage). The same columns in the same
// order per warp: the same bits as the whole-span loop.
template <bool kVector, int kTiles>
__device__ __forceinline__ void stream_pipelined(const LaneRows<kTiles>& rows, int warp, int t,
                                                 int k, float (&acc)[kTiles][4]) {
  constexpr int kRounds = 4;
  constexpr int kHalf = kRounds * kWarpCols;  // one stage
  constexpr int kSpan = 2 * kHalf;            // a warp's span, as in stream_whole_spans
  constexpr int kStep = kWarps * kSpan;
  SpanCodes<kTiles, kRounds> a, b;
  int span = warp * kSpan;
  if (span < k) load_weights<kVector>(a, rows, span, t, k);
  pdl_wait();
  if (span < k) load_x<kVector>(a, rows, span, t, k);
  // Stages alternate by name (a, b): registers cannot be indexed by a loop variable.
  for (; span < k; span += kStep) {
    const int second = span + kHalf;
    if (second < k) {
      load_weights<kVector>(b, rows, second, t, k);
      load_x<kVector>(b, rows, second, t, k);
    }
    multiply(a, span, k, acc);
    if (second >= k) break;
    const int after = span + kStep;
    if (after < k) {
      load_weights<kVector>(a, rows, after, t, k);
      load_x<kVector>(a, rows, after, t, k);
    }
    multiply(b, second, k, acc);
  }
}

template <typename OutT, int kTiles, bool kVector, bool kPipelined>
__global__ void __launch_bounds__(kWarps * 32)
    fp8_skinny_gemm_kernel(const std::uint8_t* x, const float* x_scales,
                           const std::uint8_t* __restrict__ w, const float* __restrict__ w_scales,
                           const OutT* __restrict__ bias, OutT* __restrict__ y, int m, int n,
                           int k) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int ch0 = static_cast<int>(blockIdx.x) * kTileChannels;
  // Channels past n read the last row (in bounds) and are never written; x rows past m are zeros.
  LaneRows<kTiles> rows;
  rows.w[0] = w + static_cast<std::int64_t>(min(ch0 + g, n - 1)) * k;
  rows.w[1] = w + static_cast<std::int64_t>(min(ch0 + g + 8, n - 1)) * k;
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    rows.x_live[j] = 8 * j + g < m;
    rows.x[j] = x + static_cast<std::int64_t>(min(8 * j + g, m - 1)) * k;
  }

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  pdl_launch_dependents();
  if constexpr (kPipelined) {
    stream_pipelined<kVector>(rows, warp, t, k, acc);
  } else {
    stream_whole_spans<kVector>(rows, warp, t, k, acc);
  }

  __shared__ float partial[kWarps][kTiles * 8][kTileChannels];  // [warp][x row][channel]
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    const int row = 8 * j + 2 * t;
    partial[warp][row][g] = acc[j][0];
    partial[warp][row + 1][g] = acc[j][1];
    partial[warp][row][g + 8] = acc[j][2];
    partial[warp][row + 1][g + 8] = acc[j][3];
  }
  __syncthreads();
  // One thread per (x row, channel) output adds the warps' sums in a fixed order; consecutive
  // threads write consecutive channels.
  for (int o = static_cast<int>(threadIdx.x); o < kTiles * 8 * kTileChannels; o += kWarps * 32) {
    const int i = o / kTileChannels, c = o % kTileChannels, ch = ch0 + c;
    if (i >= m || ch >= n) continue;
    float sum = partial[0][i][c];
#pragma unroll
    for (int v = 1; v < kWarps; ++v) sum += partial[v][i][c];
    float out = __fmul_rn(__fmul_rn(sum * kUnscale, x_scales[i]), w_scales[ch]);
    if (bias != nullptr) out = __fadd_rn(out, to_float(bias[ch]));
    y[static_cast<std::int64_t>(i) * n + ch] = from_float<OutT>(out);
  }
}

template <typename OutT, int kTiles, bool kVector, bool kPipelined>
Status launch_shape(const Fp8SkinnyGemmParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.n + kTileChannels - 1) / kTileChannels);
  return launch_pdl(fp8_skinny_gemm_kernel<OutT, kTiles, kVector, kPipelined>, dim3(blocks),
                    dim3(kWarps * 32), 0, stream, "fp8_skinny_gemm", p.x, p.x_scales, p.w,
                    p.w_scales, static_cast<const OutT*>(p.bias), static_cast<OutT*>(p.y),
                    static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k));
}

// One x tile up to 8 rows, two up to 16; 16-byte loads where every row is aligned.
template <typename OutT, bool kPipelined>
Status launch_loop(const Fp8SkinnyGemmParams& p, cudaStream_t stream) {
  const bool vector = p.k % kChunk == 0 && is_aligned16(p.x) && is_aligned16(p.w);
  if (p.m <= 8) {
    return vector ? launch_shape<OutT, 1, true, kPipelined>(p, stream)
                  : launch_shape<OutT, 1, false, kPipelined>(p, stream);
  }
  return vector ? launch_shape<OutT, 2, true, kPipelined>(p, stream)
                : launch_shape<OutT, 2, false, kPipelined>(p, stream);
}

template <typename OutT>
Status launch_typed(const Fp8SkinnyGemmParams& p, Fp8SkinnyVariant variant, cudaStream_t stream) {
  return variant == Fp8SkinnyVariant::kPipelined ? launch_loop<OutT, true>(p, stream)
                                                 : launch_loop<OutT, false>(p, stream);
}

// PAGODA_FP8_SKINNY, read once: what kAuto runs. An unknown value fails every kAuto launch with a
// message naming the variable (at the executor's first step), not silently.
const StatusOr<Fp8SkinnyVariant>& variant_environment() {
  static const StatusOr<Fp8SkinnyVariant> from_env = []() -> StatusOr<Fp8SkinnyVariant> {
    const char* env = std::getenv("PAGODA_FP8_SKINNY");
    const std::string value = env == nullptr ? "" : env;
    if (value.empty() || value == "whole-span") return Fp8SkinnyVariant::kWholeSpan;
    if (value == "pipelined") return Fp8SkinnyVariant::kPipelined;
    return invalid_argument("PAGODA_FP8_SKINNY: '" + value +
                            "' is not one of whole-span, pipelined");
  }();
  return from_env;
}

}  // namespace

Status launch_fp8_skinny_gemm(const Fp8SkinnyGemmParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "fp8_skinny_gemm";
  PAGODA_KERNEL_REQUIRE(p.m >= 0 && p.m <= kFp8SkinnyGemmMaxRows, kOp);
  PAGODA_KERNEL_REQUIRE(p.n >= 1 && p.n <= (std::int64_t{1} << 30), kOp);
  PAGODA_KERNEL_REQUIRE(p.k >= 1 && p.k <= (std::int64_t{1} << 30), kOp);
  PAGODA_KERNEL_REQUIRE(p.dtype == cuda::ScalarType::kBF16 || p.dtype == cuda::ScalarType::kF16,
                        kOp);
  if (p.m == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.x != nullptr && p.x_scales != nullptr && p.w != nullptr &&
                            p.w_scales != nullptr && p.y != nullptr,
                        kOp);
  Fp8SkinnyVariant variant = p.variant;
  if (variant == Fp8SkinnyVariant::kAuto) {
    PAGODA_ASSIGN_OR_RETURN(variant, variant_environment());
  }
  return p.dtype == cuda::ScalarType::kBF16 ? launch_typed<__nv_bfloat16>(p, variant, stream)
                                            : launch_typed<__half>(p, variant, stream);
}

}  // namespace pagoda::kernels
