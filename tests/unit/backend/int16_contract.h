// The int16-activation matmul contract (matmul_int16_avx512.h) in plain scalar code, for every
// weight type the int16 kernels take: the AVX-512 and the AVX2 kernels are both checked bit for
// bit against it. It reads the GGUF block layouts itself, independently of the kernels' block
// decoders (int16_blocks.h) and of the reference dequantizer (model/dequantize.cc).
//
// Per row of x and 32-column block b: amax = max |x[c]|, s = amax / Q,
// q[c] = round_half_even(x[c] * (Q / amax)) (0 if amax == 0; a non-finite x makes s NaN), with
// Q = 32767, or 127 for int8 activations (cpu_int8_activations()).
// The weight row's block b is S sub-blocks t of 32 / S columns with integer quants qw[c], an fp32
// scale_t and min_t (weight ~= scale_t * qw[c] + min_t); per t in order:
//   acc = fma(float(sum q * qw), scale_t * s, acc)
//   acc = fma(min_t, float(sum q) * s, acc)          (types with mins only)
// from acc = 0, blocks in order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "model/dequantize.h"
#include "model/dtype.h"

namespace pagoda::cpu::testing {

/// Columns of x that share one int16 scale.
inline constexpr int kContractBlock = 32;

/// The weight types the contract defines.
inline constexpr DType kContractTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                                           DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                                           DType::kQ5_K, DType::kQ6_K};

/// One 32-column block of a weight row: S sub-blocks of 32 / S columns.
struct ContractBlock {
  int sub_blocks = 1;
  bool has_min = false;
  int q[kContractBlock] = {};
  float scale[2] = {};
  float min[2] = {};
};

namespace contract_detail {

inline float half(const std::uint8_t* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return fp16_to_float(bits);
}

inline std::uint32_t u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Nibble c of a 16-byte Q4/Q5 quant array: low nibbles are elements 0-15, high ones 16-31.
inline int nibble(const std::uint8_t* qs, int c) {
  return c < 16 ? (qs[c] & 0x0F) : (qs[c - 16] >> 4);
}

// Q4_K/Q5_K: the 6-bit (scale, min) of sub-block j from the 12 packed bytes.
inline void k_scale_min(const std::uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q3_K: the 6-bit scale i (0..15) from the 12 packed bytes, without its offset of 32.
inline int q3_k_scale(const std::uint8_t* s, int i) {
  const int low = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return low | (high << 4);
}

// 2-bit field of column c of 32-column block j in a 256-weight K-quant array of 64 bytes
// (Q2_K/Q3_K quants, Q6_K high bits): blocks 4h..4h+3 share bytes 32h..32h+31, block j at bit
// 2 (j % 4).
inline int two_bits(const std::uint8_t* qs, int j, int c) {
  return (qs[32 * (j / 4) + c] >> (2 * (j % 4))) & 3;
}

}  // namespace contract_detail

/// Block b (32 columns) of the weight row at `w_row`.
inline ContractBlock contract_block(DType dtype, const std::uint8_t* w_row, std::int64_t b) {
  using namespace contract_detail;
  const DTypeInfo& info = dtype_info(dtype);
  const std::int64_t per_stored = info.block_size / kContractBlock;
  const std::uint8_t* g = w_row + static_cast<std::size_t>(b / per_stored) * info.block_bytes;
  const int j = static_cast<int>(b % per_stored);
  ContractBlock out;
  switch (dtype) {
    case DType::kQ8_0:
      out.scale[0] = half(g);
      for (int c = 0; c < 32; ++c) out.q[c] = static_cast<std::int8_t>(g[2 + c]);
      break;
    case DType::kQ4_0:
      out.scale[0] = half(g);
      for (int c = 0; c < 32; ++c) out.q[c] = nibble(g + 2, c) - 8;
      break;
    case DType::kQ4_1:
      out.has_min = true;
      out.scale[0] = half(g);
      out.min[0] = half(g + 2);
      for (int c = 0; c < 32; ++c) out.q[c] = nibble(g + 4, c);
      break;
    case DType::kQ5_0: {
      out.scale[0] = half(g);
      const std::uint32_t qh = u32(g + 2);
      for (int c = 0; c < 32; ++c) {
        out.q[c] = (nibble(g + 6, c) | static_cast<int>(((qh >> c) & 1) << 4)) - 16;
      }
      break;
    }
    case DType::kQ5_1: {
      out.has_min = true;
      out.scale[0] = half(g);
      out.min[0] = half(g + 2);
      const std::uint32_t qh = u32(g + 4);
      for (int c = 0; c < 32; ++c) {
        out.q[c] = nibble(g + 8, c) | static_cast<int>(((qh >> c) & 1) << 4);
      }
      break;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      // fp16 d | fp16 dmin | 12 scale bytes | (Q5_K: qh[32]) | qs[128]
      out.has_min = true;
      int scale = 0;
      int min = 0;
      k_scale_min(g + 4, j, scale, min);
      out.scale[0] = half(g) * static_cast<float>(scale);
      out.min[0] = -(half(g + 2) * static_cast<float>(min));
      const bool five = dtype == DType::kQ5_K;
      const std::uint8_t* qs = g + (five ? 48 : 16);
      for (int c = 0; c < 32; ++c) {
        out.q[c] = (qs[32 * (j / 2) + c] >> (4 * (j % 2))) & 0x0F;
        if (five) out.q[c] |= ((g[16 + c] >> j) & 1) << 4;
      }
      break;
    }
    case DType::kQ6_K: {
      // ql[128] | qh[64] | int8 scales[16] | fp16 d
      out.sub_blocks = 2;
      const float d = half(g + 208);
      for (int t = 0; t < 2; ++t) {
        out.scale[t] = d * static_cast<float>(static_cast<std::int8_t>(g[192 + 2 * j + t]));
      }
      const std::uint8_t* ql = g + 64 * (j / 4) + 32 * (j % 2);
      for (int c = 0; c < 32; ++c) {
        const int low = (ql[c] >> (4 * ((j % 4) / 2))) & 0x0F;
        out.q[c] = (low | (two_bits(g + 128, j, c) << 4)) - 32;
      }
      break;
    }
    case DType::kQ3_K: {
      // hmask[32] | qs[64] | 12 scale bytes | fp16 d; a clear hmask bit subtracts 4.
      out.sub_blocks = 2;
      const float d = half(g + 108);
      for (int t = 0; t < 2; ++t) {
        out.scale[t] = d * static_cast<float>(q3_k_scale(g + 96, 2 * j + t) - 32);
      }
      for (int c = 0; c < 32; ++c) {
        const int high = (g[c] >> j) & 1;
        out.q[c] = two_bits(g + 32, j, c) - (high != 0 ? 0 : 4);
      }
      break;
    }
    case DType::kQ2_K: {
      // scales[16] (low nibble scale, high nibble min) | qs[64] | fp16 d | fp16 dmin
      out.sub_blocks = 2;
      out.has_min = true;
      const float d = half(g + 80);
      const float dmin = half(g + 82);
      for (int t = 0; t < 2; ++t) {
        const std::uint8_t sc = g[2 * j + t];
        out.scale[t] = d * static_cast<float>(sc & 0x0F);
        out.min[t] = -(dmin * static_cast<float>(sc >> 4));
      }
      for (int c = 0; c < 32; ++c) out.q[c] = two_bits(g + 16, j, c);
      break;
    }
    default: PAGODA_CHECK(false) << "no int16 contract for " << dtype_name(dtype);
  }
  return out;
}

/// y = x . w_row under the contract (without bias), for k a multiple of the type's block size;
/// code_max is Q.
inline float contract(DType dtype, const float* x, const std::uint8_t* w_row, std::int64_t k,
                      float code_max = 32767.0f) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < k / kContractBlock; ++b) {
    const float* xb = x + b * kContractBlock;
    float amax = 0.0f;
    bool finite = true;
    for (int c = 0; c < kContractBlock; ++c) {
      amax = std::max(amax, std::fabs(xb[c]));
      finite = finite && std::isfinite(xb[c]);
    }
    if (!finite) return std::numeric_limits<float>::quiet_NaN();
    const float s = amax / code_max;
    const float to_int = amax > 0.0f ? code_max / amax : 0.0f;
    const ContractBlock wb = contract_block(dtype, w_row, b);
    const int width = kContractBlock / wb.sub_blocks;
    for (int t = 0; t < wb.sub_blocks; ++t) {
      std::int32_t dot = 0;
      std::int32_t qsum = 0;
      for (int c = t * width; c < (t + 1) * width; ++c) {
        const auto q = static_cast<std::int32_t>(std::nearbyint(xb[c] * to_int));
        dot += q * wb.q[c];
        qsum += q;
      }
      acc = std::fma(static_cast<float>(dot), wb.scale[t] * s, acc);
      if (wb.has_min) acc = std::fma(wb.min[t], static_cast<float>(qsum) * s, acc);
    }
  }
  return acc;
}

}  // namespace pagoda::cpu::testing
