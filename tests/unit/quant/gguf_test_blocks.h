// GGUF blocks of a dense fp32 matrix, for tests that need realistic quantized weights of a given
// type (the CUDA executor's GGUF forms against the CPU executor): plain round-to-nearest with the
// scales of each block's range, written in the block layouts model/dequantize.cc documents. Not
// llama.cpp's quantizers (no importance search); only valid blocks of sensible values matter.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/dequantize.h"
#include "model/dtype.h"
#include "quant/float_codes.h"

namespace pagoda::quant::testing {

namespace gguf_detail {

inline void put_fp16(std::uint8_t* p, float v) {
  const std::uint16_t bits = float_to_fp16(v);
  p[0] = static_cast<std::uint8_t>(bits & 0xFF);
  p[1] = static_cast<std::uint8_t>(bits >> 8);
}

inline float fp16_value(float v) {
  return fp16_to_float(float_to_fp16(v));
}

inline int clamp_round(float v, int lo, int hi) {
  return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi);
}

// Codes 0..max of `n` weights for w ~ d * q - m (m = -min), d > 0.
inline void affine_codes(const float* w, int n, float d, float m, int max, int* q) {
  for (int j = 0; j < n; ++j) q[j] = d > 0.0f ? clamp_round((w[j] + m) / d, 0, max) : 0;
}

// Q4_K / Q5_K's 8 (scale, min) 6-bit pairs into 12 bytes (the inverse of the dequantizer's
// unpacking).
inline void pack_k_scales(const int* sc, const int* mn, std::uint8_t* s) {
  std::memset(s, 0, 12);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] |= static_cast<std::uint8_t>(sc[j] & 63);
      s[j + 4] |= static_cast<std::uint8_t>(mn[j] & 63);
    } else {
      s[j + 4] = static_cast<std::uint8_t>((sc[j] & 15) | ((mn[j] & 15) << 4));
      s[j - 4] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<std::uint8_t>((mn[j] >> 4) << 6);
    }
  }
}

// One Q4_K (bits 4) or Q5_K (bits 5) super-block of 256 weights.
inline void k_block(const float* w, int bits, std::uint8_t* b) {
  const int max = (1 << bits) - 1;
  float scale[8], min[8];
  for (int s = 0; s < 8; ++s) {
    const float lo = std::min(0.0f, *std::min_element(w + 32 * s, w + 32 * s + 32));
    const float hi = *std::max_element(w + 32 * s, w + 32 * s + 32);
    scale[s] = (hi - lo) / static_cast<float>(max);
    min[s] = -lo;
  }
  const float d = fp16_value(*std::max_element(scale, scale + 8) / 63.0f);
  const float dmin = fp16_value(*std::max_element(min, min + 8) / 63.0f);
  put_fp16(b, d);
  put_fp16(b + 2, dmin);
  int sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d > 0.0f ? clamp_round(scale[s] / d, 0, 63) : 0;
    mn[s] = dmin > 0.0f ? clamp_round(min[s] / dmin, 0, 63) : 0;
  }
  pack_k_scales(sc, mn, b + 4);
  std::uint8_t* qs = b + (bits == 4 ? 16 : 48);
  std::memset(qs, 0, 128);
  if (bits == 5) std::memset(b + 16, 0, 32);
  for (int s = 0; s < 8; ++s) {
    int q[32];
    affine_codes(w + 32 * s, 32, d * static_cast<float>(sc[s]), dmin * static_cast<float>(mn[s]),
                 max, q);
    for (int j = 0; j < 32; ++j) {
      qs[32 * (s / 2) + j] |= static_cast<std::uint8_t>((q[j] & 15) << (4 * (s % 2)));
      if (bits == 5) b[16 + j] |= static_cast<std::uint8_t>(((q[j] >> 4) & 1) << s);
    }
  }
}

// One Q6_K super-block: 16 int8 scales, codes q - 32 in [-32, 31].
inline void q6_k_block(const float* w, std::uint8_t* b) {
  float scale[16];
  for (int s = 0; s < 16; ++s) {
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::abs(w[16 * s + j]));
    scale[s] = amax / 31.0f;
  }
  const float d = fp16_value(*std::max_element(scale, scale + 16) / 127.0f);
  std::memset(b, 0, 210);
  put_fp16(b + 208, d);
  for (int s = 0; s < 16; ++s) {
    const int sc = d > 0.0f ? clamp_round(scale[s] / d, 0, 127) : 0;
    b[192 + s] = static_cast<std::uint8_t>(sc);
    for (int j = 0; j < 16; ++j) {
      const int e = 16 * s + j, half = e / 128, r = e % 128;
      const float step = d * static_cast<float>(sc);
      const int q = step > 0.0f ? clamp_round(w[e] / step, -32, 31) + 32 : 32;
      b[64 * half + r % 64] |= static_cast<std::uint8_t>((q & 15) << (4 * (r / 64)));
      b[128 + 32 * half + r % 32] |= static_cast<std::uint8_t>((q >> 4) << (2 * (r / 32)));
    }
  }
}

}  // namespace gguf_detail

/// `rows` x `cols` weights (row-major) as GGUF blocks of `dtype`: Q4_1, Q5_0, Q8_0, Q4_K, Q5_K or
/// Q6_K; cols a multiple of the block size.
inline std::vector<std::uint8_t> quantize_gguf(DType dtype, const float* w, std::int64_t rows,
                                               std::int64_t cols) {
  using namespace gguf_detail;
  const DTypeInfo& info = dtype_info(dtype);
  std::vector<std::uint8_t> out(
      static_cast<std::size_t>(rows * (cols / info.block_size) * info.block_bytes));
  std::uint8_t* b = out.data();
  for (std::int64_t blk = 0; blk < rows * cols / info.block_size; ++blk, b += info.block_bytes) {
    const float* x = w + blk * info.block_size;
    switch (dtype) {
      case DType::kQ4_1: {
        const float lo = *std::min_element(x, x + 32), hi = *std::max_element(x, x + 32);
        const float d = fp16_value((hi - lo) / 15.0f), m = fp16_value(lo);
        put_fp16(b, d);
        put_fp16(b + 2, m);
        int q[32];
        affine_codes(x, 32, d, -m, 15, q);
        for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<std::uint8_t>(q[j] | (q[j + 16] << 4));
        break;
      }
      case DType::kQ5_0:
      case DType::kQ8_0: {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
        const bool q8 = dtype == DType::kQ8_0;
        const float d = fp16_value(amax / (q8 ? 127.0f : 15.0f));
        put_fp16(b, d);
        std::uint32_t qh = 0;
        for (int j = 0; j < 32; ++j) {
          const int q = d > 0.0f ? clamp_round(x[j] / d, q8 ? -127 : -16, q8 ? 127 : 15) : 0;
          if (q8) {
            b[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
            continue;
          }
          const int u = q + 16;
          qh |= static_cast<std::uint32_t>((u >> 4) & 1) << j;
          if (j < 16) {
            b[6 + j] = static_cast<std::uint8_t>(u & 15);
          } else {
            b[6 + j - 16] |= static_cast<std::uint8_t>((u & 15) << 4);
          }
        }
        if (!q8) std::memcpy(b + 2, &qh, 4);
        break;
      }
      case DType::kQ4_K: k_block(x, 4, b); break;
      case DType::kQ5_K: k_block(x, 5, b); break;
      case DType::kQ6_K: q6_k_block(x, b); break;
      default: break;
    }
  }
  return out;
}

}  // namespace pagoda::quant::testing
