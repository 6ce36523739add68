#include "model/dequantize.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace pagoda {

namespace {

std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}

std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

float load_fp16(const std::uint8_t* p) {
  return fp16_to_float(load_u16(p));
}

// Every block decoder below follows the reference order of operations (scale * quant, then
// + min or - min, each rounded to float on its own); dequantize.cc is compiled with
// -ffp-contract=off so the compiler cannot fuse them into one FMA and change the rounding.

// Q4_0, 32 weights in 18 bytes: fp16 d | 16 bytes of nibbles. Weight j is the low nibble of
// byte j, weight j+16 the high nibble; value = d * (nibble - 8).
void block_q4_0(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

// Q4_1, 32 weights in 20 bytes: fp16 d | fp16 m | 16 bytes of nibbles; value = d * nibble + m.
void block_q4_1(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const float m = load_fp16(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

// 5-bit quant j of a Q5 block: nibble as in Q4, fifth bit = bit j of the 32-bit qh word.
int q5_value(const std::uint8_t* qs, std::uint32_t qh, int j) {
  const int nibble = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

// Q5_0, 32 weights in 22 bytes: fp16 d | u32 qh | 16 bytes of nibbles; value = d * (q - 16).
void block_q5_0(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const std::uint32_t qh = load_u32(b + 2);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_value(b + 6, qh, j) - 16);
}

// Q5_1, 32 weights in 24 bytes: fp16 d | fp16 m | u32 qh | 16 bytes of nibbles; d * q + m.
void block_q5_1(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const float m = load_fp16(b + 2);
  const std::uint32_t qh = load_u32(b + 4);
  for (int j = 0; j < 32; ++j) y[j] = d * static_cast<float>(q5_value(b + 8, qh, j)) + m;
}

// Q8_0, 32 weights in 34 bytes: fp16 d | 32 int8; value = q * d.
void block_q8_0(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(b[2 + j])) * d;
}

// The 2-bit field of element e (0..255) in a 64-byte K-quant array: each half of the block
// (128 weights) uses 32 bytes; within a half, weights [32s, 32s+32) sit at bit 2s of bytes 0..31.
//
//   half h = e / 128,  shift s = (e % 128) / 32,  byte = 32h + e % 32
int k_two_bits(const std::uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

// Q2_K, 256 weights in 84 bytes: scales[16] (low nibble scale, high nibble min, one per 16
// weights) | qs[64] 2-bit | fp16 d | fp16 dmin; value = (d*scale) * q - (dmin*min).
void block_q2_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = load_fp16(b + 80);
  const float dmin = load_fp16(b + 82);
  for (int e = 0; e < 256; ++e) {
    const std::uint8_t sc = scales[e / 16];
    const float dl = d * static_cast<float>(sc & 0x0F);
    const float ml = dmin * static_cast<float>(sc >> 4);
    y[e] = dl * static_cast<float>(k_two_bits(qs, e)) - ml;
  }
}

// Q3_K's sixteen 6-bit scales packed in 12 bytes: low 4 bits from bytes 0..7 (low nibbles for
// scales 0..7, high nibbles for 8..15), high 2 bits from bytes 8..11 (scale i at bit 2*(i/4)
// of byte 8 + i%4); stored with an offset of 32.
int q3_k_scale(const std::uint8_t* scales, int i) {
  const int low = i < 8 ? (scales[i] & 0x0F) : (scales[i - 8] >> 4);
  const int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q3_K, 256 weights in 110 bytes: hmask[32] | qs[64] 2-bit | scales[12] | fp16 d. The third bit
// of weight e is bit e/32 of hmask[e%32]; a clear bit means the 2-bit value is offset by -4.
void block_q3_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::uint8_t* scales = b + 96;
  const float d = load_fp16(b + 108);
  for (int e = 0; e < 256; ++e) {
    const float dl = d * static_cast<float>(q3_k_scale(scales, e / 16));
    const int high_clear = ((hmask[e % 32] >> (e / 32)) & 1) ^ 1;
    y[e] = dl * static_cast<float>(k_two_bits(qs, e) - 4 * high_clear);
  }
}

// Q4_K/Q5_K's eight 6-bit (scale, min) pairs packed in 12 bytes:
//   j < 4:  scale = bytes[j] & 63,                          min = bytes[j+4] & 63
//   j >= 4: scale = (bytes[j+4] & 15) | (bytes[j-4] >> 6) << 4,
//           min   = (bytes[j+4] >> 4) | (bytes[j] >> 6) << 4
void k_scale_min(const std::uint8_t* s, int j, int& scale, int& min) {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The 4-bit field of element e in a 128-byte K-quant array: bytes 32c..32c+31 hold sub-blocks
// 2c (low nibbles) and 2c+1 (high nibbles) of 32 weights each.
int k_nibble(const std::uint8_t* qs, int e) {
  const int sub = e / 32;
  return (qs[32 * (sub / 2) + e % 32] >> (4 * (sub % 2))) & 0x0F;
}

// Q4_K, 256 weights in 144 bytes: fp16 d | fp16 dmin | scales[12] | qs[128];
// value = (d*scale) * q - (dmin*min), one (scale, min) per 32 weights.
void block_q4_k(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const float dmin = load_fp16(b + 2);
  for (int sub = 0; sub < 8; ++sub) {
    int scale = 0;
    int min = 0;
    k_scale_min(b + 4, sub, scale, min);
    const float dl = d * static_cast<float>(scale);
    const float ml = dmin * static_cast<float>(min);
    for (int e = 32 * sub; e < 32 * sub + 32; ++e) {
      y[e] = dl * static_cast<float>(k_nibble(b + 16, e)) - ml;
    }
  }
}

// Q5_K, 256 weights in 176 bytes: fp16 d | fp16 dmin | scales[12] | qh[32] | qs[128]; the fifth
// bit of weight e is bit e/32 of qh[e%32].
void block_q5_k(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const float dmin = load_fp16(b + 2);
  const std::uint8_t* qh = b + 16;
  for (int sub = 0; sub < 8; ++sub) {
    int scale = 0;
    int min = 0;
    k_scale_min(b + 4, sub, scale, min);
    const float dl = d * static_cast<float>(scale);
    const float ml = dmin * static_cast<float>(min);
    for (int e = 32 * sub; e < 32 * sub + 32; ++e) {
      const int q = k_nibble(b + 48, e) | (((qh[e % 32] >> sub) & 1) << 4);
      y[e] = dl * static_cast<float>(q) - ml;
    }
  }
}

// Q6_K, 256 weights in 210 bytes: ql[128] low nibbles | qh[64] high 2 bits | int8 scales[16] |
// fp16 d. Each half (128 weights) uses 64 ql bytes (weights r < 64 in low nibbles, r >= 64 in
// high nibbles) and 32 qh bytes (2-bit fields as in k_two_bits); value = (d*scale) * (q - 32).
void block_q6_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* scales = b + 192;
  const float d = load_fp16(b + 208);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128;
    const int r = e % 128;
    const int low = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int q = (low | (k_two_bits(qh, e) << 4)) - 32;
    const float dl = d * static_cast<float>(static_cast<std::int8_t>(scales[e / 16]));
    y[e] = dl * static_cast<float>(q);
  }
}

void block_f32(const std::uint8_t* b, float* y) {
  std::memcpy(y, b, sizeof(float));
}
void block_f16(const std::uint8_t* b, float* y) {
  *y = fp16_to_float(load_u16(b));
}
void block_bf16(const std::uint8_t* b, float* y) {
  *y = bf16_to_float(load_u16(b));
}

void block_f8_e4m3(const std::uint8_t* b, float* y) {
  *y = fp8_e4m3_to_float(*b);
}

// Q4_Z, 32 weights in 19 bytes: fp16 d | u8 z | 16 bytes of nibbles in Q4_0's order;
// value = d * (q - z). q - z is a small integer, so the product is exact in float: the weight is
// exactly what a GPTQ or AWQ checkpoint defines, with no rounding added.
void block_q4_z(const std::uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const int z = b[2];
  const std::uint8_t* qs = b + 3;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0F) - z);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - z);
  }
}

// F8_S, 32 weights in 36 bytes: fp32 s | 32 E4M3 bytes; value = s * f, one float rounding.
void block_f8_s(const std::uint8_t* b, float* y) {
  float s;
  std::memcpy(&s, b, sizeof(s));
  for (int j = 0; j < 32; ++j) y[j] = s * fp8_e4m3_to_float(b[4 + j]);
}

using BlockDecoder = void (*)(const std::uint8_t*, float*);

BlockDecoder decoder_for(DType dtype) {
  switch (dtype) {
    case DType::kF32: return block_f32;
    case DType::kF16: return block_f16;
    case DType::kBF16: return block_bf16;
    case DType::kQ4_0: return block_q4_0;
    case DType::kQ4_1: return block_q4_1;
    case DType::kQ5_0: return block_q5_0;
    case DType::kQ5_1: return block_q5_1;
    case DType::kQ8_0: return block_q8_0;
    case DType::kQ2_K: return block_q2_k;
    case DType::kQ3_K: return block_q3_k;
    case DType::kQ4_K: return block_q4_k;
    case DType::kQ5_K: return block_q5_k;
    case DType::kQ6_K: return block_q6_k;
    case DType::kF8E4M3: return block_f8_e4m3;
    case DType::kQ4_Z: return block_q4_z;
    case DType::kF8_S: return block_f8_s;
    default: return nullptr;
  }
}

}  // namespace

float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits >> 15) << 31;
  const std::uint32_t exponent = (bits >> 10) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3FF;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

float fp8_e4m3_to_float(std::uint8_t bits) {
  // E4M3 (OCP FP8, "fn" variant): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities,
  // S.1111.111 is NaN, so the largest magnitude is 448.
  const bool negative = (bits & 0x80) != 0;
  const int exponent = (bits >> 3) & 0x0F;
  const int mantissa = bits & 0x07;
  float magnitude;
  if (exponent == 0x0F && mantissa == 0x07) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = static_cast<float>(mantissa) * 0x1p-9f;  // Subnormal: mantissa/8 * 2^-6.
  } else {
    magnitude = std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  }
  return negative ? -magnitude : magnitude;
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

bool dequantize_supported(DType dtype) {
  return decoder_for(dtype) != nullptr;
}

Status dequantize(DType dtype, std::span<const std::uint8_t> src, std::span<float> dst) {
  const BlockDecoder decode = decoder_for(dtype);
  if (decode == nullptr) {
    return unimplemented("dequantizing " + std::string(dtype_name(dtype)) +
                         " is not supported; use a model quantized as F32, F16, BF16, Q4_0, "
                         "Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K or F8_E4M3");
  }
  const DTypeInfo& info = dtype_info(dtype);
  const std::optional<std::uint64_t> bytes = dtype_num_bytes(dtype, dst.size());
  if (!bytes || *bytes != src.size()) {
    return invalid_argument(std::to_string(dst.size()) + " " + std::string(info.name) +
                            " elements need whole blocks of " + std::to_string(info.block_size) +
                            " and " + (bytes ? std::to_string(*bytes) : std::string("?")) +
                            " bytes, got " + std::to_string(src.size()) + " bytes");
  }
  const std::size_t num_blocks = dst.size() / static_cast<std::size_t>(info.block_size);
  for (std::size_t i = 0; i < num_blocks; ++i) {
    decode(src.data() + i * static_cast<std::size_t>(info.block_bytes),
           dst.data() + i * static_cast<std::size_t>(info.block_size));
  }
  return {};
}

}  // namespace pagoda
