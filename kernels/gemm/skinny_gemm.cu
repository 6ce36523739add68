#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/skinny_gemm.h"

namespace pagoda::kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kPack = 8;               // 16-bit elements per 16-byte load
constexpr int kWarpSpan = 32 * kPack;  // elements of k one warp covers per load round

__device__ __forceinline__ float2 widen(__nv_bfloat162 v) {
  return __bfloat1622float2(v);
}
__device__ __forceinline__ float2 widen(__half2 v) {
  return __half22float2(v);
}

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
};
template <>
struct Pair<__half> {
  using type = __half2;
};

// 8 elements of a 16-byte load, widened to fp32.
template <typename T>
__device__ __forceinline__ void widen_pack(const uint4& raw, float (&out)[kPack]) {
  const auto* pairs = reinterpret_cast<const typename Pair<T>::type*>(&raw);
#pragma unroll
  for (int j = 0; j < kPack / 2; ++j) {
    const float2 f = widen(pairs[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

// A block owns R consecutive output columns (weight rows) for all m <= M rows of x; its warps
// split k, so even a 4096-row weight gives 4 x 1024 warps to hide memory latency. Each lane
// reads 16 bytes of each weight row per round, U rounds issued before any is used; the weight
// is read once with evict-first loads while x (a few KB) stays in L1. Lanes meet in a
// butterfly, warps in shared memory.
template <typename T, typename OutT, int M, int R, int U>
__global__ void __launch_bounds__(kWarps * 32)
    skinny_gemm_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                       OutT* __restrict__ y, int m, int n, int k) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int col0 = static_cast<int>(blockIdx.x) * R;
  const T* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows[r] = w + static_cast<std::int64_t>(min(col0 + r, n - 1)) * k;

  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

  pdl_launch_dependents();
  constexpr int kBlockSpan = kWarps * kWarpSpan;
  bool waited = false;
  for (int base = (warp * 32 + lane) * kPack; base < k; base += kBlockSpan * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = base + u * kBlockSpan;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wv[u][r] = kk < k ? __ldcs(reinterpret_cast<const uint4*>(rows[r] + kk)) : uint4{};
      }
    }
    // The weights do not depend on the kernel before (PDL): the first round is in flight while
    // that kernel finishes; x, its output, is read only after the wait.
    if (!waited) {
      pdl_wait();
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = base + u * kBlockSpan;
      if (kk >= k) break;
      float wf[R][kPack];
#pragma unroll
      for (int r = 0; r < R; ++r) widen_pack<T>(wv[u][r], wf[r]);
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= m) break;
        float xf[kPack];
        widen_pack<T>(
            __ldg(reinterpret_cast<const uint4*>(x + static_cast<std::int64_t>(i) * k + kk)), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int j = 0; j < kPack; ++j) acc[r][i] = fmaf(wf[r][j], xf[j], acc[r][i]);
      }
    }
  }

  if (!waited) pdl_wait();  // a lane with no k (k < its offset) still writes y below
  __shared__ float partial[kWarps][R][M];
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (lane == 0) partial[warp][r][i] = v;
    }
  }
  __syncthreads();
  // One thread per (column, row) output adds the warps' partial sums in a fixed order.
  const int t = static_cast<int>(threadIdx.x);
  if (t >= R * M) return;
  const int r = t / M, i = t % M, col = col0 + r;
  if (col >= n || i >= m) return;
  float sum = bias != nullptr ? to_float(bias[col]) : 0.0f;
#pragma unroll
  for (int v = 0; v < kWarps; ++v) sum += partial[v][r][i];
  y[static_cast<std::int64_t>(i) * n + col] = from_float<OutT>(sum);
}

// Columns per block and rounds in flight per row count: fewer x rows leave registers for more
// weight loads in flight.
template <typename T, typename OutT, int M>
Status launch_rows(const SkinnyGemmParams& p, cudaStream_t stream) {
  constexpr int R = M <= 2 ? 4 : 2;
  constexpr int U = 2;
  const auto blocks = static_cast<unsigned>((p.n + R - 1) / R);
  return launch_pdl(skinny_gemm_kernel<T, OutT, M, R, U>, dim3(blocks), dim3(kWarps * 32), 0,
                    stream, "skinny_gemm", static_cast<const T*>(p.x), static_cast<const T*>(p.w),
                    static_cast<const T*>(p.bias), static_cast<OutT*>(p.y), static_cast<int>(p.m),
                    static_cast<int>(p.n), static_cast<int>(p.k));
}

template <typename T, typename OutT>
Status launch_typed(const SkinnyGemmParams& p, cudaStream_t stream) {
  if (p.m == 1) return launch_rows<T, OutT, 1>(p, stream);
  if (p.m == 2) return launch_rows<T, OutT, 2>(p, stream);
  return launch_rows<T, OutT, 4>(p, stream);
}

}  // namespace

bool skinny_gemm_applies(const SkinnyGemmParams& p) {
  return (p.dtype == cuda::ScalarType::kBF16 || p.dtype == cuda::ScalarType::kF16) && p.m >= 1 &&
         p.m <= kSkinnyGemmMaxRows && p.n >= 1 && p.n <= 0x7fffffff && p.k >= kPack &&
         p.k % kPack == 0 && p.k <= 0x7fffffff && is_aligned16(p.x) && is_aligned16(p.w);
}

Status launch_skinny_gemm(const SkinnyGemmParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "skinny_gemm";
  PAGODA_KERNEL_REQUIRE(skinny_gemm_applies(p), kOp);
  PAGODA_KERNEL_REQUIRE(p.y != nullptr, kOp);
  if (p.dtype == cuda::ScalarType::kBF16) {
    return p.output_f32 ? launch_typed<__nv_bfloat16, float>(p, stream)
                        : launch_typed<__nv_bfloat16, __nv_bfloat16>(p, stream);
  }
  return p.output_f32 ? launch_typed<__half, float>(p, stream)
                      : launch_typed<__half, __half>(p, stream);
}

}  // namespace pagoda::kernels
