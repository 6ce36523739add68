#include "quant/fp8_channel_layout.h"

#include <atomic>
#include <cstring>
#include <string>

#include "quant/f8_s_block.h"
#include "quant/load_threads.h"

namespace pagoda::quant {

namespace {

constexpr std::int64_t kRowsPerRange = 64;

}  // namespace

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
  // The first row whose blocks differ in scale (q.rows: none); each range stops at its first,
  // so the smallest over all ranges is the matrix's first, whatever the threads did.
  std::atomic<std::int64_t> first_bad_row{q.rows};
  parallel_ranges(q.rows, kRowsPerRange, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const std::uint8_t* row = q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes();
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = row + b * kF8SBlockBytes;
        if (std::memcmp(block, row, sizeof(float)) != 0) {
          std::int64_t seen = first_bad_row.load();
          while (n < seen && !first_bad_row.compare_exchange_weak(seen, n)) {
          }
          return;
        }
        std::memcpy(m.codes.data() + n * q.cols + b * 32, block + 4, 32);
      }
      std::memcpy(&m.scales[static_cast<std::size_t>(n)], row, sizeof(float));
    }
  });
  if (first_bad_row.load() < q.rows) {
    return unimplemented("FP8 weights with scales that vary along a row (block-scaled, row " +
                         std::to_string(first_bad_row.load()) +
                         ") have no per-channel GPU layout yet");
  }
  return m;
}

}  // namespace pagoda::quant
