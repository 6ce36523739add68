// x as the int8 tiles take it (matmul_int8_avx512.h, matmul_int8_avx2.h): quantized with codes in
// [-127, 127] (the int16 contract's rounding with a code maximum of 127) and transposed so that a
// lane holds one row of x and an int32 four adjacent columns as bytes. ISA-neutral.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// The arrays of one call's x, `lanes` = the tile's lanes times its vectors:
struct Int8Columns {
  const std::int32_t* quads = nullptr;    ///< [k / 4, lanes]: bytes q[l, 4c'], .., q[l, 4c' + 3]
  const float* scales = nullptr;          ///< [k / 32, lanes]: s
  const float* scaled_sums = nullptr;     ///< [k / 32, lanes]: qsum * s
  const std::int32_t* offsets = nullptr;  ///< [k / 16, lanes]: -128 * sum of q over 16 columns
};

}  // namespace pagoda::cpu
