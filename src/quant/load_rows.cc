#include "quant/load_rows.h"

#include <vector>

#include "model/dequantize.h"
#include "quant/load_threads.h"

namespace pagoda::quant {

StatusOr<RowSource> dequantized_rows(const std::string& name, const ModelTensor& weight,
                                     std::int64_t rows, std::int64_t cols) {
  if (!dequantize_supported(weight.dtype)) {
    return unimplemented(name + ": cannot quantize a " + std::string(dtype_name(weight.dtype)) +
                         " weight at load");
  }
  const std::optional<std::uint64_t> row_bytes =
      dtype_num_bytes(weight.dtype, static_cast<std::uint64_t>(cols));
  if (!row_bytes || weight.data.size() != *row_bytes * static_cast<std::uint64_t>(rows)) {
    return invalid_argument(name + ": " + std::to_string(weight.data.size()) +
                            " bytes do not hold [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "] " + std::string(dtype_name(weight.dtype)));
  }
  return RowSource([&weight, row_bytes = *row_bytes](std::int64_t n, std::span<float> row) {
    // Sizes were checked above, so the row always decodes.
    (void)dequantize(weight.dtype, weight.data.subspan(n * row_bytes, row_bytes), row);
  });
}

void for_each_row_f32(std::int64_t rows, std::int64_t cols, const RowSource& source,
                      const std::function<void(std::int64_t, std::span<const float>)>& visit) {
  constexpr std::int64_t kRowsPerRange = 16;
  parallel_ranges(rows, kRowsPerRange, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t n = begin; n < end; ++n) {
      source(n, row);
      visit(n, row);
    }
  });
}

}  // namespace pagoda::quant
