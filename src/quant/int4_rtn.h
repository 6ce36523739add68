// `--quantization int4`: round-to-nearest asymmetric 4-bit quantization at load, group-wise along
// each row, into Q4_Z blocks. Per group of `group_size` input channels (the last may be shorter):
//   d = fp16((max - min) / 15), z = clamp(round(-min / d), 0, 15),
//   q = clamp(round(w / d) + z, 0, 15);  weight = d * (q - z)
// with min <= 0 <= max widened to include zero, so zero itself is exact.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_files.h"
#include "pagoda/status.h"
#include "quant/load_rows.h"
#include "quant/quantized_matrix.h"

namespace pagoda::quant {

/// Input channels per scale of `--quantization int4`.
inline constexpr std::int64_t kInt4RtnGroupSize = 128;

/// `weight` [rows, cols] of any dequantizable type (cols % 32 == 0) quantized to Q4_Z.
StatusOr<QuantizedMatrix> quantize_int4_rtn(const std::string& name, const ModelTensor& weight,
                                            std::int64_t rows, std::int64_t cols,
                                            std::int64_t group_size = kInt4RtnGroupSize);

/// The same for a weight given row by row (--load-format dummy draws its rows).
StatusOr<QuantizedMatrix> quantize_int4_rtn(const std::string& name, const RowSource& source,
                                            std::int64_t rows, std::int64_t cols,
                                            std::int64_t group_size = kInt4RtnGroupSize);

}  // namespace pagoda::quant
