// How the decode kernels read one group of a panel (interleaved_rows.h), per weight type, written
// once for both ISAs: `Lanes` is the kernel's view of the panel's rows
// (matmul_interleaved_avx512.cc: all 16 in a zmm; matmul_interleaved_avx2.cc: 8 of them, one side,
// in a ymm) and supplies the loads and the few vector operations the readers need. Include only
// from a translation unit compiled for that ISA.
//
// Each reader's for_each_block(lanes, group, f) calls f(j, codes, scale[kSub], min) for the
// group's blocks j in column order: codes.units[u] holds 4 code bytes of each row (columns 4u ..
// 4u + 3 of the block), before the type's offset (kOffset; Q8_0's are the signed bytes, kSigned);
// scale[t] is d times the sub-block scale per row, min the value the block's sum of x multiplies
// (K-quants: -(dmin * m); Q4_1: m; else 0).
//
//   Lanes::Int / Lanes::Float     the vector types
//   lanes.unit(p)                 the rows' 4-byte units of a 64-byte unit line at p
//   lanes.halves(p)               the rows' fp16 values of a 2-byte run at p, as floats
//   lanes.bytes(p)                the rows' int8 values of a 1-byte run at p, as int32
//   Lanes::and_, or_, xor_, srli16, slli16, srli32, mullo32, set1_8, set1_32, zero, times
//   (d x int32)
#pragma once

#include <cstdint>

#include "backend/cpu/int16_kernel_loops.h"
#include "model/dtype.h"

namespace pagoda::cpu::panels {

inline constexpr int kUnitBytes = 64;  // one 4-byte unit of each of 16 rows

template <typename Int>
struct BlockCodes {
  Int units[8];
};

template <typename Lanes>
inline typename Lanes::Int lane_bits(typename Lanes::Int v, int shift, int mask) {
  return Lanes::and_(Lanes::srli32(v, shift), Lanes::set1_32(mask));
}

// Q8_0: d | 8 units of signed codes.
struct Q8_0 {
  static constexpr DType kType = DType::kQ8_0;
  static constexpr int kSub = 1, kGroupBlocks = 1, kGroupBytes = 34, kOffset = 0;
  static constexpr bool kSigned = true, kHasMin = false;
  template <typename Lanes, typename F>
  static void for_each_block(const Lanes& lanes, const std::uint8_t* g, F&& f) {
    const typename Lanes::Float d[1] = {lanes.halves(g)};
    BlockCodes<typename Lanes::Int> codes;
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) codes.units[u] = lanes.unit(g + 32 + u * kUnitBytes);
    f(0, codes, d, Lanes::zero());
  }
};

// Bits shift .. shift + 3 of each 32-bit lane as bit 4 of its bytes 0 .. 3 (Q5_0/Q5_1's fifth
// bits of 4 columns): the multiply by 1 + 2^7 + 2^14 + 2^21 puts bit i at bit 8i, with no two
// terms on one bit.
template <typename Lanes>
inline typename Lanes::Int fifth_bits(typename Lanes::Int qh, int shift) {
  const typename Lanes::Int spread =
      Lanes::mullo32(lane_bits<Lanes>(qh, shift, 0xF), Lanes::set1_32(0x00204081));
  return Lanes::slli16(Lanes::and_(spread, Lanes::set1_32(0x01010101)), 4);
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: d | (Q4_1, Q5_1: m) | (Q5_0, Q5_1: qh, one unit) | 4 units of
// nibbles, unit u's low nibbles columns 4u .. 4u + 3, its high ones 16 + 4u ...; Q5's fifth bit of
// column c is bit c of the row's qh.
template <DType kDType>
struct Nibbles {
  static constexpr DType kType = kDType;
  static constexpr bool kHasMin = kDType == DType::kQ4_1 || kDType == DType::kQ5_1;
  static constexpr bool kFifthBit = kDType == DType::kQ5_0 || kDType == DType::kQ5_1;
  static constexpr bool kSigned = false;
  static constexpr int kSub = 1, kGroupBlocks = 1;
  static constexpr int kGroupBytes = 18 + (kHasMin ? 2 : 0) + (kFifthBit ? 4 : 0);
  static constexpr int kOffset = kHasMin ? 0 : kFifthBit ? 16 : 8;
  template <typename Lanes, typename F>
  static void for_each_block(const Lanes& lanes, const std::uint8_t* g, F&& f) {
    const typename Lanes::Float d[1] = {lanes.halves(g)};
    const typename Lanes::Float min = kHasMin ? lanes.halves(g + 32) : Lanes::zero();
    const std::uint8_t* fifth = g + (kHasMin ? 64 : 32);
    const std::uint8_t* units = fifth + (kFifthBit ? kUnitBytes : 0);
    const typename Lanes::Int low4 = Lanes::set1_8(0x0F);
    BlockCodes<typename Lanes::Int> codes;
    typename Lanes::Int qh{};
    if constexpr (kFifthBit) qh = lanes.unit(fifth);
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const typename Lanes::Int raw = lanes.unit(units + u * kUnitBytes);
      codes.units[u] = Lanes::and_(raw, low4);
      codes.units[4 + u] = Lanes::and_(Lanes::srli16(raw, 4), low4);
      if constexpr (kFifthBit) {
        codes.units[u] = Lanes::or_(codes.units[u], fifth_bits<Lanes>(qh, 4 * u));
        codes.units[4 + u] = Lanes::or_(codes.units[4 + u], fifth_bits<Lanes>(qh, 16 + 4 * u));
      }
    }
    f(0, codes, d, min);
  }
};
using Q4_0 = Nibbles<DType::kQ4_0>;
using Q4_1 = Nibbles<DType::kQ4_1>;
using Q5_0 = Nibbles<DType::kQ5_0>;
using Q5_1 = Nibbles<DType::kQ5_1>;

// Q4_K / Q5_K: d | dmin | the 12 scale bytes as 3 words | (Q5_K: qh, 8 units: bit j of a byte is
// block j's fifth bit) | 4 runs of 8 units, run q's low nibbles block 2q, high nibbles block
// 2q + 1. Scales and mins as int16_blocks.h's k_scales8 forms them.
template <DType kDType>
struct KQuant {
  static constexpr DType kType = kDType;
  static constexpr bool kFifthBit = kDType == DType::kQ5_K;
  static constexpr int kSub = 1, kGroupBlocks = 8, kGroupBytes = kFifthBit ? 176 : 144;
  static constexpr int kOffset = 0;
  static constexpr bool kSigned = false, kHasMin = true;
  template <typename Lanes, typename F>
  static void for_each_block(const Lanes& lanes, const std::uint8_t* g, F&& f) {
    using Int = typename Lanes::Int;
    using Float = typename Lanes::Float;
    const Float d = lanes.halves(g);
    const Float dmin = lanes.halves(g + 32);
    const Int s0 = lanes.unit(g + 64);
    const Int s1 = lanes.unit(g + 128);
    const Int s2 = lanes.unit(g + 192);
    const std::uint8_t* fifth = g + 256;
    const std::uint8_t* runs = g + (kFifthBit ? 768 : 256);
    const Int low4 = Lanes::set1_8(0x0F);
    int16::for_each_block<4>([&](auto q_constant) {
      constexpr int q = decltype(q_constant)::value;
      // Blocks 2q and 2q + 1: scale and min bytes (j < 4: s0/s1 byte j; else s2 and the high
      // bits of s0/s1 byte j - 4).
      Float scale[2], min[2];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        const int j = 2 * q + half;
        Int sc, m;
        if (j < 4) {
          sc = lane_bits<Lanes>(s0, 8 * j, 63);
          m = lane_bits<Lanes>(s1, 8 * j, 63);
        } else {
          const int b = j - 4;
          sc = Lanes::or_(lane_bits<Lanes>(s2, 8 * b, 15), lane_bits<Lanes>(s0, 8 * b + 2, 0x30));
          m = Lanes::or_(lane_bits<Lanes>(s2, 8 * b + 4, 15),
                         lane_bits<Lanes>(s1, 8 * b + 2, 0x30));
        }
        scale[half] = Lanes::times(d, sc);
        min[half] = Lanes::negate(Lanes::times(dmin, m));
      }
      const std::uint8_t* run = runs + q * 8 * kUnitBytes;
      int16::for_each_block<2>([&](auto half_constant) {
        constexpr int j = 2 * q + decltype(half_constant)::value;
        BlockCodes<Int> codes;
#pragma GCC unroll 8
        for (int u = 0; u < 8; ++u) {
          Int nibble = lanes.unit(run + u * kUnitBytes);
          if constexpr (j % 2 == 1) nibble = Lanes::srli16(nibble, 4);
          codes.units[u] = Lanes::and_(nibble, low4);
          if constexpr (kFifthBit) {  // bit j of the qh byte to bit 4
            Int bit = lanes.unit(fifth + u * kUnitBytes);
            if constexpr (j < 4) bit = Lanes::slli16(bit, 4 - j);
            if constexpr (j > 4) bit = Lanes::srli16(bit, j - 4);
            codes.units[u] = Lanes::or_(codes.units[u], Lanes::and_(bit, Lanes::set1_8(0x10)));
          }
        }
        f(j, codes, &scale[j % 2], min[j % 2]);
      });
    });
  }
};
using Q4_K = KQuant<DType::kQ4_K>;
using Q5_K = KQuant<DType::kQ5_K>;

// Q6_K: d | 16 int8 scales (16 bytes each) | per 128-column half h: ql runs 2h and 2h + 1 (8
// units each), then qh run h (8 units). Block 4h + jj: ql run 2h + jj % 2, nibble jj / 2, qh bits
// 2 jj; codes q6 (offset 32).
struct Q6_K {
  static constexpr DType kType = DType::kQ6_K;
  static constexpr int kSub = 2, kGroupBlocks = 8, kGroupBytes = 210, kOffset = 32;
  static constexpr bool kSigned = false, kHasMin = false;
  template <typename Lanes, typename F>
  static void for_each_block(const Lanes& lanes, const std::uint8_t* g, F&& f) {
    using Int = typename Lanes::Int;
    using Float = typename Lanes::Float;
    const Float d = lanes.halves(g);
    const std::uint8_t* scales = g + 32;
    const Int low4 = Lanes::set1_8(0x0F);
    const Int high2 = Lanes::set1_8(0x30);
    int16::for_each_block<8>([&](auto j_constant) {
      constexpr int j = decltype(j_constant)::value;
      constexpr int h = j / 4, jj = j % 4;
      const std::uint8_t* half = g + 32 + 256 + h * 1536;
      const std::uint8_t* ql = half + (jj % 2) * 8 * kUnitBytes;
      const std::uint8_t* qh = half + 16 * kUnitBytes;
      Float scale[2];
#pragma GCC unroll 2
      for (int t = 0; t < 2; ++t)
        scale[t] = Lanes::times(d, lanes.bytes(scales + (2 * j + t) * 16));
      BlockCodes<Int> codes;
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) {
        Int low = lanes.unit(ql + u * kUnitBytes);
        if constexpr (jj / 2 == 1) low = Lanes::srli16(low, 4);
        Int high = lanes.unit(qh + u * kUnitBytes);  // bits 2 jj, 2 jj + 1 to bits 4, 5
        if constexpr (2 * jj < 4) high = Lanes::slli16(high, 4 - 2 * jj);
        if constexpr (2 * jj > 4) high = Lanes::srli16(high, 2 * jj - 4);
        codes.units[u] = Lanes::or_(Lanes::and_(low, low4), Lanes::and_(high, high2));
      }
      f(j, codes, scale, Lanes::zero());
    });
  }
};

/// f(Reader{}) for an interleave_supported() type (the caller checks).
template <typename F>
decltype(auto) with_reader(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kQ4_0: return f(Q4_0{});
    case DType::kQ4_1: return f(Q4_1{});
    case DType::kQ5_0: return f(Q5_0{});
    case DType::kQ5_1: return f(Q5_1{});
    case DType::kQ4_K: return f(Q4_K{});
    case DType::kQ5_K: return f(Q5_K{});
    case DType::kQ6_K: return f(Q6_K{});
    default: return f(Q8_0{});
  }
}

}  // namespace pagoda::cpu::panels
