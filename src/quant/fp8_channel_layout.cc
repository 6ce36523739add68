#include "quant/fp8_channel_layout.h"

#include <cstring>
#include <string>

#include "quant/f8_s_block.h"

namespace pagoda::quant {

StatusOr<Fp8ChannelMatrix> split_fp8_per_channel(const QuantizedMatrix& q) {
  if (q.dtype != DType::kF8_S || q.rows <= 0 || q.cols <= 0 || q.cols % 32 != 0 ||
      q.bytes.size() != static_cast<std::size_t>(q.rows) * q.row_bytes()) {
    return invalid_argument("FP8 per-channel layout: not a well-formed F8_S matrix");
  }
  Fp8ChannelMatrix m;
  m.rows = q.rows;
  m.cols = q.cols;
  m.codes.resize(static_cast<std::size_t>(q.rows * q.cols));
  m.scales.resize(static_cast<std::size_t>(q.rows));
  m.input_permutation = q.input_permutation;
  const std::int64_t blocks = q.cols / 32;
  for (std::int64_t n = 0; n < q.rows; ++n) {
    const std::uint8_t* row = q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes();
    float scale = 0.0f;
    std::memcpy(&scale, row, sizeof(scale));
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint8_t* block = row + b * kF8SBlockBytes;
      if (std::memcmp(block, row, sizeof(float)) != 0) {
        return unimplemented("FP8 weights with scales that vary along a row (block-scaled, row " +
                             std::to_string(n) + ") have no per-channel GPU layout yet");
      }
      std::memcpy(m.codes.data() + n * q.cols + b * 32, block + 4, 32);
    }
    m.scales[static_cast<std::size_t>(n)] = scale;
  }
  return m;
}

}  // namespace pagoda::quant
