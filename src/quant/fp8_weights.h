// FP8 E4M3 linear weights as F8_S blocks: read from FP8 checkpoints, or made at load from any
// weight the reference dequantizer reads (`--quantization fp8`).
//
// Checkpoint scales (weight = scale * e4m3, the product the checkpoint defines):
//   per tensor    weight_scale [] or [1]                      (compressed-tensors, fp8)
//   per channel   weight_scale [N, 1] or [N]                  (compressed-tensors)
//   per block     weight_scale(_inv) [ceil(N/br), ceil(K/bc)] (compressed-tensors block, fp8
//                                                              weight_block_size; bc % 32 == 0)
#pragma once

#include <cstdint>
#include <string>

#include "model/model_files.h"
#include "model/quantization_config.h"
#include "pagoda/status.h"
#include "quant/load_rows.h"
#include "quant/quantized_matrix.h"

namespace pagoda::quant {

/// The FP8 layer `name` (for errors): `weight` F8_E4M3 [rows, cols] and its `scale` (F32, BF16
/// or F16, one of the shapes above) into F8_S.
StatusOr<QuantizedMatrix> fp8_from_checkpoint(const std::string& name, const ModelTensor& weight,
                                              const ModelTensor& scale,
                                              const QuantizationConfig& config, std::int64_t rows,
                                              std::int64_t cols);

/// `weight` [rows, cols] of any dequantizable type, quantized to E4M3 with one scale per output
/// row: scale = max|w_row| / 448, codes rounded to nearest even.
StatusOr<QuantizedMatrix> quantize_fp8_per_channel(const std::string& name,
                                                   const ModelTensor& weight, std::int64_t rows,
                                                   std::int64_t cols);

/// The same for a weight given row by row (--load-format dummy draws its rows).
StatusOr<QuantizedMatrix> quantize_fp8_per_channel(const std::string& name, const RowSource& source,
                                                   std::int64_t rows, std::int64_t cols);

}  // namespace pagoda::quant
