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
  PAGODA_ASSIGN_OR_RETURN(Fp8ChannelMatrix m,
                          split_fp8_per_channel(q.rows, q.cols, [&](std::int64_t n) {
                            return q.bytes.data() + static_cast<std::size_t>(n) * q.row_bytes();
                          }));
  m.input_permutation = q.input_permutation;
  return m;
}

StatusOr<Fp8ChannelMatrix> split_fp8_per_channel(
    std::int64_t rows, std::int64_t cols,
    const std::function<const std::uint8_t*(std::int64_t n)>& row_of) {
  if (rows <= 0 || cols <= 0 || cols % 32 != 0) {
    return invalid_argument("FP8 per-channel layout: not a well-formed F8_S matrix");
  }
  Fp8ChannelMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.codes.resize(static_cast<std::size_t>(rows * cols));
  m.scales.resize(static_cast<std::size_t>(rows));
  const std::int64_t blocks = cols / 32;
  // The first row whose blocks differ in scale (rows: none); each range stops at its first,
  // so the smallest over all ranges is the matrix's first, whatever the threads did.
  std::atomic<std::int64_t> first_bad_row{rows};
  parallel_ranges(rows, kRowsPerRange, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const std::uint8_t* row = row_of(n);
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::uint8_t* block = row + b * kF8SBlockBytes;
        if (std::memcmp(block, row, sizeof(float)) != 0) {
          std::int64_t seen = first_bad_row.load();
          while (n < seen && !first_bad_row.compare_exchange_weak(seen, n)) {
          }
          return;
        }
        std::memcpy(m.codes.data() + n * cols + b * 32, block + 4, 32);
      }
      std::memcpy(&m.scales[static_cast<std::size_t>(n)], row, sizeof(float));
    }
  });
  if (first_bad_row.load() < rows) {
    return unimplemented("FP8 weights with scales that vary along a row (block-scaled, row " +
                         std::to_string(first_bad_row.load()) +
                         ") have no per-channel GPU layout yet");
  }
  return m;
}

}  // namespace pagoda::quant
