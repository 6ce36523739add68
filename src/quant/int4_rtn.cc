#include "quant/int4_rtn.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "common/vector_clones.h"
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

// A float's bits as an int32 that orders as the values do (NaN aside), and back.
std::int32_t ordered_key(float v) {
  const auto bits = std::bit_cast<std::int32_t>(v);
  return bits ^ ((bits >> 31) & 0x7FFFFFFF);
}
float from_ordered_key(std::int32_t key) {
  return std::bit_cast<float>(key ^ ((key >> 31) & 0x7FFFFFFF));
}

// lo = min(0, values...) and hi = max(0, values...) over the values that are not NaN, as folding
// std::min / std::max from 0 gives them, except that a -0.0 may count below +0.0: the quantizer
// uses lo only in hi - lo and -lo / d, where a zero's sign changes nothing. On the values'
// ordered keys, so each ISA's clone vectorizes the reductions.
PAGODA_VECTOR_CLONES void group_range(const float* values, std::int64_t n, float& lo, float& hi) {
  std::int32_t low = 0;
  std::int32_t high = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t magnitude = std::bit_cast<std::int32_t>(values[i]) & 0x7FFFFFFF;
    // NaN counts as 0, which the range already holds.
    const std::int32_t key = ordered_key(values[i]) & -std::int32_t{magnitude <= 0x7F800000};
    low = std::min(low, key);
    high = std::max(high, key);
  }
  lo = from_ordered_key(low);
  hi = from_ordered_key(high);
}

// q[i] = clamp(round_to_even(values[i] / d) + zero, 0, 15) for a group's values: every float
// operation comes before the selects, so each ISA's clone vectorizes the loop.
PAGODA_VECTOR_CLONES void group_codes(const float* values, std::int64_t n, float d, float zero,
                                      std::uint8_t* q) {
  for (std::int64_t i = 0; i < n; ++i) {
    float code = round_to_even(values[i] / d) + zero;
    code = code < 0.0f ? 0.0f : code;
    code = code > 15.0f ? 15.0f : code;
    q[i] = static_cast<std::uint8_t>(static_cast<std::int32_t>(code));
  }
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
    thread_local std::vector<std::uint8_t> codes;
    codes.resize(static_cast<std::size_t>(group_size));
    for (std::int64_t g0 = 0; g0 < cols; g0 += group_size) {
      const std::int64_t g1 = std::min(cols, g0 + group_size);
      float lo = 0.0f;
      float hi = 0.0f;
      group_range(row.data() + g0, g1 - g0, lo, hi);
      std::uint16_t d_bits = float_to_fp16((hi - lo) / 15.0f);
      float d = fp16_to_float(d_bits);
      if (!(d > 0.0f) || !std::isfinite(d)) {
        // An all-zero group (or one below fp16's range): any positive scale is exact.
        d_bits = float_to_fp16(1.0f);
        d = 1.0f;
      }
      const auto zero = static_cast<std::uint8_t>(std::clamp(round_to_even(-lo / d), 0.0f, 15.0f));
      group_codes(row.data() + g0, g1 - g0, d, zero, codes.data());
      for (std::int64_t b0 = g0; b0 < g1; b0 += 32) {
        write_q4_z_block(d_bits, zero, codes.data() + (b0 - g0), dst + (b0 / 32) * kQ4ZBlockBytes);
      }
    }
  });
  return m;
}

}  // namespace pagoda::quant
