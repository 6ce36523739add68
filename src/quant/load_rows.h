// The rows of a weight as fp32 for the load-time quantizers: decoded from a stored tensor, or
// drawn (--load-format dummy), and visited on the load threads (load_threads.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "model/model_files.h"
#include "pagoda/status.h"

namespace pagoda::quant {

/// Writes row n of a [rows, cols] weight into `row` [cols]; called from several threads at once.
using RowSource = std::function<void(std::int64_t n, std::span<float> row)>;

/// The rows of `weight` [rows, cols] (which must outlive the source) as the reference
/// dequantizer decodes them; an error naming `name` when its type has no dequantizer or its bytes
/// do not hold that shape.
StatusOr<RowSource> dequantized_rows(const std::string& name, const ModelTensor& weight,
                                     std::int64_t rows, std::int64_t cols);

/// Calls `visit(n, row)` for each row n of `source` [rows, cols]; rows are visited in parallel,
/// so `visit` must only write row n's output.
void for_each_row_f32(std::int64_t rows, std::int64_t cols, const RowSource& source,
                      const std::function<void(std::int64_t, std::span<const float>)>& visit);

}  // namespace pagoda::quant
