#include "quant/load_rows.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "model/dequantize.h"

namespace pagoda::quant {

Status for_each_row_f32(const std::string& name, const ModelTensor& weight, std::int64_t rows,
                        std::int64_t cols,
                        const std::function<void(std::int64_t, const std::vector<float>&)>& visit) {
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
  // Quantizing a whole model at load is worth the machine's cores; rows are independent.
  const auto num_threads =
      static_cast<std::int64_t>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 16u));
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    std::vector<float> row(static_cast<std::size_t>(cols));
    constexpr std::int64_t kRowsPerGrab = 16;
    for (std::int64_t begin = next.fetch_add(kRowsPerGrab); begin < rows;
         begin = next.fetch_add(kRowsPerGrab)) {
      for (std::int64_t n = begin; n < std::min(rows, begin + kRowsPerGrab); ++n) {
        // Sizes were checked above, so the row always decodes.
        (void)dequantize(weight.dtype, weight.data.subspan(n * *row_bytes, *row_bytes), row);
        visit(n, row);
      }
    }
  };
  std::vector<std::thread> threads;
  for (std::int64_t t = 1; t < std::min(num_threads, rows); ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return {};
}

}  // namespace pagoda::quant
