#include "backend/cpu/tensor_view.h"

#include "common/check.h"

namespace pagoda::cpu {

TensorView dense_view(const void* data, DType dtype, std::int64_t num_rows, std::int64_t num_cols) {
  const DTypeInfo& info = dtype_info(dtype);
  PAGODA_CHECK(num_cols % info.block_size == 0)
      << num_cols << " columns do not fill whole " << info.name << " blocks";
  const auto row_stride = static_cast<std::size_t>(num_cols / info.block_size) *
                          static_cast<std::size_t>(info.block_bytes);
  return TensorView{data, dtype, num_rows, num_cols, row_stride};
}

}  // namespace pagoda::cpu
