#include "quant/fp8_weights.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/dequantize.h"
#include "quant/f8_s_block.h"
#include "quant/float_codes.h"
#include "quant/load_rows.h"
#include "quant/load_threads.h"

namespace pagoda::quant {

namespace {

QuantizedMatrix empty_f8_s(std::int64_t rows, std::int64_t cols, std::int64_t group_size) {
  QuantizedMatrix m;
  m.dtype = DType::kF8_S;
  m.rows = rows;
  m.cols = cols;
  m.group_size = group_size;
  m.bytes.resize(static_cast<std::size_t>(rows) * m.row_bytes());
  return m;
}

}  // namespace

StatusOr<QuantizedMatrix> fp8_from_checkpoint(const std::string& name, const ModelTensor& weight,
                                              const ModelTensor& scale,
                                              const QuantizationConfig& config, std::int64_t rows,
                                              std::int64_t cols) {
  if (weight.dtype != DType::kF8E4M3) {
    return invalid_argument(name + ".weight has type " + std::string(dtype_name(weight.dtype)) +
                            ", expected F8_E4M3 for an FP8 checkpoint");
  }
  if (cols % 32 != 0) {
    return unimplemented(name + ": FP8 layers need in_features % 32 == 0, got " +
                         std::to_string(cols));
  }
  if (scale.dtype != DType::kF32 && scale.dtype != DType::kBF16 && scale.dtype != DType::kF16) {
    return invalid_argument(scale.name + " has type " + std::string(dtype_name(scale.dtype)) +
                            ", expected F32, BF16 or F16");
  }
  std::vector<float> scales(scale.num_elements());
  PAGODA_RETURN_IF_ERROR(dequantize(scale.dtype, scale.data, scales));
  // Which scale each (row, 32-block) uses, from the scale tensor's size.
  std::int64_t block_rows = rows;
  std::int64_t block_cols = cols;
  std::int64_t tiles_per_row = 1;
  if (scales.size() == 1) {
    // One scale for everything.
  } else if (static_cast<std::int64_t>(scales.size()) == rows &&
             config.fp8_strategy != Fp8ScaleStrategy::kBlock) {
    block_rows = 1;
  } else if (config.fp8_strategy == Fp8ScaleStrategy::kBlock) {
    block_rows = config.fp8_block_size[0];
    block_cols = config.fp8_block_size[1];
    tiles_per_row = (cols + block_cols - 1) / block_cols;
    const std::int64_t tile_rows = (rows + block_rows - 1) / block_rows;
    if (static_cast<std::int64_t>(scales.size()) != tile_rows * tiles_per_row) {
      return invalid_argument(scale.name + " has " + std::to_string(scales.size()) +
                              " scales, expected " + std::to_string(tile_rows * tiles_per_row) +
                              " for " + std::to_string(block_rows) + "x" +
                              std::to_string(block_cols) + " blocks");
    }
  } else {
    return invalid_argument(scale.name + " has " + std::to_string(scales.size()) +
                            " scales, expected 1 (per tensor) or " + std::to_string(rows) +
                            " (per channel)");
  }
  QuantizedMatrix m = empty_f8_s(rows, cols, block_cols);
  const std::int64_t num_blocks = cols / 32;
  constexpr std::int64_t kRowsPerRange = 64;
  parallel_ranges(rows, kRowsPerRange, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const std::uint8_t* codes = weight.data.data() + n * cols;
      std::uint8_t* dst = m.bytes.data() + static_cast<std::size_t>(n) * m.row_bytes();
      for (std::int64_t b = 0; b < num_blocks; ++b) {
        const std::int64_t tile = (n / block_rows) * tiles_per_row + (b * 32) / block_cols;
        write_f8_s_block(scales[static_cast<std::size_t>(tile)], codes + b * 32,
                         dst + b * kF8SBlockBytes);
      }
    }
  });
  return m;
}

StatusOr<QuantizedMatrix> quantize_fp8_per_channel(const std::string& name,
                                                   const ModelTensor& weight, std::int64_t rows,
                                                   std::int64_t cols) {
  PAGODA_ASSIGN_OR_RETURN(const RowSource source, dequantized_rows(name, weight, rows, cols));
  return quantize_fp8_per_channel(name, source, rows, cols);
}

StatusOr<QuantizedMatrix> quantize_fp8_per_channel(const std::string& name, const RowSource& source,
                                                   std::int64_t rows, std::int64_t cols) {
  if (cols % 32 != 0) {
    return unimplemented(name + ": --quantization fp8 needs in_features % 32 == 0, got " +
                         std::to_string(cols));
  }
  QuantizedMatrix m = empty_f8_s(rows, cols, cols);
  for_each_row_f32(rows, cols, source, [&](std::int64_t n, std::span<const float> row) {
    const float amax = max_magnitude(row.data(), cols);
    // An all-zero row keeps scale 1 so no division by zero produces NaN codes.
    const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
    std::uint8_t* dst = m.bytes.data() + static_cast<std::size_t>(n) * m.row_bytes();
    thread_local std::vector<std::uint8_t> codes;
    codes.resize(static_cast<std::size_t>(cols));
    fp8_e4m3_codes(row.data(), scale, codes.data(), cols);
    for (std::int64_t b = 0; b < cols / 32; ++b) {
      write_f8_s_block(scale, codes.data() + b * 32, dst + b * kF8SBlockBytes);
    }
  });
  return m;
}

}  // namespace pagoda::quant
