// GGUF block types repacked into the GPU's W4A16 tiles in the GGUF form (w4a16_layout.h), so a
// GGUF model keeps its weights quantized on the GPU:
//
//   type   codes   group  S, sc                B, mc            code_zero         bits/weight
//   Q4_1   4-bit   32     d, 1                 m, 1             0                 5.5 (file 5)
//   Q4_K   4-bit   32     d (per 256), 6-bit   -dmin, 6-bit     0                 4.625 (4.5)
//   Q5_0   5-bit   32     d, 1                 -                16                5.75 (5.5)
//   Q5_1   5-bit   32     d, 1                 m, 1             0                 6.5 (6)
//   Q8_0   8-bit   32     d, 1                 -                128 (q + 128)     8.75 (8.5)
//   Q5_K   5-bit   32     d (per 256), 6-bit   -dmin, 6-bit     0                 5.625 (5.5)
//   Q6_K   6-bit   16     d (per 256), int8    -                32                6.5625 (6.5625)
//   Q2_K   4-bit   16     d (per 256), 4-bit   -dmin, 4-bit     0 (2 bits used)   5.125 (2.625)
//   Q3_K   4-bit   16     d (per 256), int6    -                4 (3 bits used)   4.5625 (3.4375)
//
// Every weight reads back (w4a16_weight) as the CPU's reference dequantizer computes it, bit for
// bit: the dequantizer forms d * sc (exact in fp32: 11 x 7 significant bits), multiplies by the
// code (exact: at most 24 bits) and adds the min (one rounding), and the GGUF form stores exactly
// those integers and fp16 values. Q4_0 keeps the zero-point form (repack_w4a16_q4_0).
//
// A fused layer whose parts differ in type (a Q4_K_M file gives some layers a Q6_K V beside Q4_K
// Q and K) stacks into one matrix of the general form: the widest codes, the parts' finest group
// (16 with a Q6_K part) and finest super-group, and a min term for every part, with each part's
// code_zero folded into it: d sc (q - z) = (d sc) q + (-z d) sc, where -z d is d times a power of
// two (exact in fp16 unless it overflows, which is refused). Each weight is then the exact value
// the dequantizer computes exactly, so it reads back equal (as a number: s q + b gives +0 where
// the dequantizer's s * 0 may give -0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "model/dtype.h"
#include "pagoda/status.h"
#include "quant/w4a16_layout.h"

namespace pagoda::quant {

/// Whether repack_gguf takes `dtype` (the table above).
bool gguf_repack_supported(DType dtype);

/// The code bits above the low nibble that `dtype` needs in packed_hi: 0 for Q4_1, Q4_K, Q2_K and
/// Q3_K, 1 for Q5_0, Q5_1, Q5_K, 2 for Q6_K, 4 for Q8_0 (0 for a type without a GPU form).
int gguf_repack_hi_bits(DType dtype);

/// W4A16Matrix::device_bytes() of a stack of parts of `types` (one type: repack_gguf's) holding
/// `rows` rows of `cols`, from the shape alone (0 if a type has no GPU form).
std::size_t gguf_device_bytes(std::span<const DType> types, std::int64_t rows, std::int64_t cols);

/// Repacks `rows` rows of `cols` weights of `dtype` (whole blocks, row-major, as a GGUF file
/// stores them). INVALID_ARGUMENT for another type or cols not whole blocks.
StatusOr<W4A16Matrix> repack_gguf(DType dtype, const std::uint8_t* blocks, std::int64_t rows,
                                  std::int64_t cols);

/// Rows of one type, a part of a fused layer.
struct GgufPart {
  DType dtype = DType::kF32;
  const std::uint8_t* blocks = nullptr;  ///< row r at blocks + r * row_stride
  std::int64_t rows = 0;
  std::size_t row_stride = 0;  ///< bytes
};

/// The parts' rows stacked (each `cols` wide) and repacked: in their type's form when they share
/// one, else in the general form above (INVALID_ARGUMENT, naming the type, where a zero folded
/// into the min overflows fp16). Rows are repacked in parallel, in 16-row bands.
StatusOr<W4A16Matrix> repack_gguf_parts(std::span<const GgufPart> parts, std::int64_t cols);

}  // namespace pagoda::quant
