#include "quant/int4_rtn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "quant/load_rows.h"
#include "quant/q4_z_block.h"

namespace pagoda::quant {

namespace {

// std::nearbyint without the libm call, which cost most of --quantization int4's time on a whole
// model: for |x| < 2^22 adding 1.5 * 2^23 leaves no fraction bits, so the sum rounds to nearest
// even in the default mode, and subtracting it back is exact. Values here lie within about
// [-16, 16] (x / d, with d the group's range / 15); larger ones (a group past fp16's range takes
// d = 1) may round differently but are clamped to the same code, and only a zero's sign can
// otherwise differ, which adding the zero point and clamping erase.
float round_to_even(float x) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23
  return (x + kShift) - kShift;
}

}  // namespace

StatusOr<QuantizedMatrix> quantize_int4_rtn(const std::string& name, const ModelTensor& weight,
                                            std::int64_t rows, std::int64_t cols,
                                            std::int64_t group_size) {
  PAGODA_ASSIGN_OR_RETURN(const RowSource source, dequantized_rows(name, weight, rows, cols));
  return quantize_int4_rtn(name, source, rows, cols, group_size);
}

StatusOr<QuantizedMatrix> quantize_int4_rtn(const std::string& name, const RowSource& source,
                                            std::int64_t rows, std::int64_t cols,
                                            std::int64_t group_size) {
  if (cols % 32 != 0 || group_size <= 0 || group_size % 32 != 0) {
    return unimplemented(name + ": --quantization int4 needs in_features % 32 == 0 (got " +
                         std::to_string(cols) + ") and a group size that is a multiple of 32");
  }
  QuantizedMatrix m;
  m.dtype = DType::kQ4_Z;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size;
  m.bytes.resize(static_cast<std::size_t>(rows) * m.row_bytes());
  for_each_row_f32(rows, cols, source, [&](std::int64_t n, std::span<const float> row) {
    std::uint8_t* dst = m.bytes.data() + static_cast<std::size_t>(n) * m.row_bytes();
    for (std::int64_t g0 = 0; g0 < cols; g0 += group_size) {
      const std::int64_t g1 = std::min(cols, g0 + group_size);
      float lo = 0.0f;
      float hi = 0.0f;
      for (std::int64_t k = g0; k < g1; ++k) {
        lo = std::min(lo, row[k]);
        hi = std::max(hi, row[k]);
      }
      std::uint16_t d_bits = float_to_fp16((hi - lo) / 15.0f);
      float d = fp16_to_float(d_bits);
      if (!(d > 0.0f) || !std::isfinite(d)) {
        // An all-zero group (or one below fp16's range): any positive scale is exact.
        d_bits = float_to_fp16(1.0f);
        d = 1.0f;
      }
      const auto zero = static_cast<std::uint8_t>(std::clamp(round_to_even(-lo / d), 0.0f, 15.0f));
      std::uint8_t q[32];
      for (std::int64_t b0 = g0; b0 < g1; b0 += 32) {
        for (int j = 0; j < 32; ++j) {
          q[j] = static_cast<std::uint8_t>(
              std::clamp(round_to_even(row[b0 + j] / d) + zero, 0.0f, 15.0f));
        }
        write_q4_z_block(d_bits, zero, q, dst + (b0 / 32) * kQ4ZBlockBytes);
      }
    }
  });
  return m;
}

}  // namespace pagoda::quant
