// The rows of a stored weight as fp32, one at a time, for the load-time quantizers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model_files.h"
#include "pagoda/status.h"

namespace pagoda::quant {

/// Calls `visit(n, row)` for each row n of `weight` [rows, cols] decoded by the reference
/// dequantizer; rows are visited in parallel, so `visit` must only write row n's output.
Status for_each_row_f32(const std::string& name, const ModelTensor& weight, std::int64_t rows,
                        std::int64_t cols,
                        const std::function<void(std::int64_t, const std::vector<float>&)>& visit);

}  // namespace pagoda::quant
