#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/fp8_skinny_gemm.h"

namespace pagoda::kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kTileChannels = 16;               // output channels per CTA: the mma's 16 rows
constexpr int kChunk = 16;                      // codes per 16-byte load
constexpr int kRounds = 8;                      // loads per weight row in flight per lane
constexpr int kWarpCols = 4 * kChunk;           // columns of one round: the 4 lanes t of a row
constexpr int kWarpSpan = kRounds * kWarpCols;  // columns a warp streams per iteration
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
// 4 warps split k in spans of kWarpSpan = 512 columns (warp w takes spans w, w + 4, w + 8, ...).
// Lane = 4 g + t. One iteration of a warp over its span [s0, s0 + 512), round u = 0..7:
//
//   columns s0 + 64u + ...     0..15      16..31     32..47     48..63
//   W row ch0 + g              lane t=0   lane t=1   lane t=2   lane t=3    -> mma A row g
//   W row ch0 + g + 8          t=0        t=1        t=2        t=3         -> mma A row g + 8
//   x row g (tile 1: g + 8)    t=0        t=1        t=2        t=3         -> mma B column g
//
// each cell 16 codes, one 16-byte load; all 16 weight loads of an iteration are issued before any
// is used. A lane's 16 codes of a row are four mma k-steps s of 4 codes (word s of the load).
// mma.m16n8k16 hands lane t the k indices {2t, 2t+1} (a0, a1, b0) and {2t+8, 2t+9} (a2, a3, b1)
// of a step; which column sits at which k index is free as long as A and B agree, so word s's
// bytes {1, 3} fill the first pair and {0, 2} the second, for W and x alike, and the 4 lanes t
// together cover the step's 16 columns. The accumulators are the mma's D tile: channel g (d0, d1)
// and g + 8 (d2, d3) at x rows 2t, 2t+1 of the tile. Warps meet in shared memory, and one thread
// per output applies the scales.
template <typename OutT, int kTiles, bool kVector>
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
  const std::uint8_t* w_rows[2] = {w + static_cast<std::int64_t>(min(ch0 + g, n - 1)) * k,
                                   w + static_cast<std::int64_t>(min(ch0 + g + 8, n - 1)) * k};
  const std::uint8_t* x_rows[kTiles];
  bool x_live[kTiles];
#pragma unroll
  for (int j = 0; j < kTiles; ++j) {
    x_live[j] = 8 * j + g < m;
    x_rows[j] = x + static_cast<std::int64_t>(min(8 * j + g, m - 1)) * k;
  }

  float acc[kTiles][4];
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;

  pdl_launch_dependents();
  bool waited = false;
  // `span` is the same for the whole warp (mma.sync needs every lane); lanes differ only in what
  // they load.
  for (int span = warp * kWarpSpan; span < k; span += kWarps * kWarpSpan) {
    const int lane_col = span + t * kChunk;
    uint4 wv[kRounds][2];
#pragma unroll
    for (int u = 0; u < kRounds; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        wv[u][r] = load_chunk<kVector, true>(w_rows[r], lane_col + u * kWarpCols, k);
      }
    // The weights do not depend on the kernel before (PDL): the first iteration's are in flight
    // while that kernel finishes; x, its output, is read only after the wait.
    if (!waited) {
      pdl_wait();
      waited = true;
    }
    uint4 xv[kRounds][kTiles];
#pragma unroll
    for (int u = 0; u < kRounds; ++u)
#pragma unroll
      for (int j = 0; j < kTiles; ++j) {
        xv[u][j] = x_live[j] ? load_chunk<kVector, false>(x_rows[j], lane_col + u * kWarpCols, k)
                             : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
    for (int u = 0; u < kRounds; ++u) {
      if (span + u * kWarpCols >= k) break;  // the whole round is past k: zeros
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        std::uint32_t a[4];
        e4m3x4_to_f16(word(wv[u][0], s), a[0], a[2]);
        e4m3x4_to_f16(word(wv[u][1], s), a[1], a[3]);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
          std::uint32_t b0, b1;
          e4m3x4_to_f16(word(xv[u][j], s), b0, b1);
          mma_16816<__half>(acc[j], a, b0, b1);
        }
      }
    }
  }

  if (!waited) pdl_wait();  // a warp with no span (k <= its offset) still meets the others below
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

template <typename OutT, int kTiles, bool kVector>
Status launch_shape(const Fp8SkinnyGemmParams& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((p.n + kTileChannels - 1) / kTileChannels);
  return launch_pdl(fp8_skinny_gemm_kernel<OutT, kTiles, kVector>, dim3(blocks), dim3(kWarps * 32),
                    0, stream, "fp8_skinny_gemm", p.x, p.x_scales, p.w, p.w_scales,
                    static_cast<const OutT*>(p.bias), static_cast<OutT*>(p.y),
                    static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k));
}

// One x tile up to 8 rows, two up to 16; 16-byte loads where every row is aligned.
template <typename OutT>
Status launch_typed(const Fp8SkinnyGemmParams& p, cudaStream_t stream) {
  const bool vector = p.k % kChunk == 0 && is_aligned16(p.x) && is_aligned16(p.w);
  if (p.m <= 8) {
    return vector ? launch_shape<OutT, 1, true>(p, stream)
                  : launch_shape<OutT, 1, false>(p, stream);
  }
  return vector ? launch_shape<OutT, 2, true>(p, stream) : launch_shape<OutT, 2, false>(p, stream);
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
  return p.dtype == cuda::ScalarType::kBF16 ? launch_typed<__nv_bfloat16>(p, stream)
                                            : launch_typed<__half>(p, stream);
}

}  // namespace pagoda::kernels
