// int16_blocks.h's decoders behind plain functions, so a test compiled for the baseline ISA can
// call them (int16_blocks_probe.cc is the one test file built with AVX2 flags).
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/dtype.h"

namespace pagoda::cpu::testing {

/// 32-column block b of 8 weight rows (row l at w + l * w_stride) of an int16 type, as
/// int16_blocks.h decodes it: quants q[l][c], scale[l][t] and min[l][t] (0 without mins).
/// Returns the type's sub-block count.
int decode_int16_blocks(DType dtype, const std::uint8_t* w, std::size_t w_stride, std::int64_t b,
                        std::int8_t q[8][32], float scale[8][2], float min[8][2]);

}  // namespace pagoda::cpu::testing
