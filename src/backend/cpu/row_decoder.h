// Stored rows to fp32: the AVX2 block decoders where the CPU and type allow, else the reference
// dequantizer. Both round exactly like gguf-py, so every path sees the same weights.
#pragma once

#include <cstdint>

#include "backend/cpu/tensor_view.h"

namespace pagoda::cpu {

/// Decodes elements [col_begin, col_begin + count) of row `row` of `t` into `dst`; both ends must
/// fall on block boundaries of t's type. An interleaved `t` has just those blocks deinterleaved.
void decode_row(const TensorView& t /* [R, C] */, std::int64_t row, std::int64_t col_begin,
                std::int64_t count, float* dst /* [count] */);

/// As decode_row from `src`, the first stored byte of a block, without its bounds checks: for
/// kernels that decode a row in several short pieces.
void decode_blocks(DType dtype, const std::uint8_t* src, std::int64_t count,
                   float* dst /* [count] */);

}  // namespace pagoda::cpu
