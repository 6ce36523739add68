// E4M3 cache codes to 16-bit tile elements inside attention kernels. Every e4m3 value is a bf16
// and an f16 value, so the conversion is exact; the per-tensor scale stays out of the tile and
// is applied to the fp32 results instead (scores and outputs), which keeps one rounding fewer
// than converting code x scale.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/mma.cuh"

namespace pagoda::kernels {

/// 16 e4m3 codes (one 16-byte chunk, code i in byte i) -> the same 16 values as T, codes 0-7 in
/// `lo` and 8-15 in `hi` (element i in the low half of word i / 2).
template <typename T>
__device__ __forceinline__ void fp8_codes_to_halves(const uint4& codes, uint4& lo, uint4& hi) {
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&codes);
  std::uint32_t out[8];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(pairs[m], __NV_E4M3);
    if constexpr (std::is_same_v<T, __half>) {
      out[m] = static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
    } else {
      const float2 f = __half22float2(__half2(h));
      out[m] = pack2<T>(f.x, f.y);  // exact: the values are e4m3's
    }
  }
  lo = make_uint4(out[0], out[1], out[2], out[3]);
  hi = make_uint4(out[4], out[5], out[6], out[7]);
}

}  // namespace pagoda::kernels
