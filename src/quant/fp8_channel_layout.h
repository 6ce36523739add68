// The GPU's FP8 weight layout: a [rows, cols] matrix of E4M3 codes with one fp32 scale per row
// (output channel), which cuBLASLt's per-row scale vectors take (cuda::BlasLt::linear_fp8).
// Split from the CPU's F8_S blocks when every block of a row carries the row's scale: per-tensor
// and per-channel checkpoints and `--quantization fp8`. Block-scaled checkpoints (scales that
// vary along a row) do not fit and are refused here.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "pagoda/status.h"
#include "quant/quantized_matrix.h"

namespace pagoda::quant {

struct Fp8ChannelMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  LoadBytes codes;            ///< [rows, cols] E4M3, in stored column order
  std::vector<float> scales;  ///< [rows]
  /// As QuantizedMatrix::input_permutation (empty for FP8 checkpoints so far).
  std::vector<std::int32_t> input_permutation;
};

/// UNIMPLEMENTED when a row's blocks carry different scales (block-scaled FP8).
StatusOr<Fp8ChannelMatrix> split_fp8_per_channel(const QuantizedMatrix& matrix);

/// The same for F8_S rows handed over one at a time: `row(n)` is row n's cols / 32 blocks (a
/// stack of parts split without copying them together first). Rows are split on the load
/// threads; the input permutation is left empty.
StatusOr<Fp8ChannelMatrix> split_fp8_per_channel(
    std::int64_t rows, std::int64_t cols,
    const std::function<const std::uint8_t*(std::int64_t n)>& row);

}  // namespace pagoda::quant
