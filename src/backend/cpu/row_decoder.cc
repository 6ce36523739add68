#include "backend/cpu/row_decoder.h"

#include <span>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kquant_blocks_avx2.h"
#include "backend/cpu/matmul_avx2.h"
#include "backend/cpu/matmul_avx512.h"
#include "backend/cpu/quant_blocks_avx2.h"
#include "common/check.h"
#include "model/dequantize.h"

namespace pagoda::cpu {

void decode_row(const TensorView& t, std::int64_t row, std::int64_t col_begin, std::int64_t count,
                float* dst) {
  const DTypeInfo& info = dtype_info(t.dtype);
  PAGODA_CHECK(col_begin % info.block_size == 0 && count % info.block_size == 0)
      << "[" << col_begin << ", +" << count << ") splits a " << info.name << " block";
  PAGODA_CHECK(row >= 0 && row < t.num_rows && col_begin >= 0 && col_begin + count <= t.num_cols)
      << "row " << row << " cols [" << col_begin << ", +" << count << ") outside [" << t.num_rows
      << ", " << t.num_cols << "]";
  const std::uint8_t* src = t.row(row) + static_cast<std::size_t>(col_begin / info.block_size) *
                                             static_cast<std::size_t>(info.block_bytes);
  decode_blocks(t.dtype, src, count, dst);
}

void decode_blocks(DType dtype, const std::uint8_t* src, std::int64_t count, float* dst) {
  if (cpu_has_avx512() && avx512::decodes(dtype)) {
    avx512::decode(dtype, src, count, dst);
    return;
  }
  if (cpu_has_avx2() && avx2::decodes(dtype)) {
    avx2::decode(dtype, src, count, dst);
    return;
  }
  if (cpu_has_avx2() && kquant_avx2::decodes(dtype)) {
    kquant_avx2::decode(dtype, src, count, dst);
    return;
  }
  if (cpu_has_avx2() && quant_avx2::decodes(dtype)) {
    quant_avx2::decode(dtype, src, count, dst);
    return;
  }
  const DTypeInfo& info = dtype_info(dtype);
  const std::size_t bytes = static_cast<std::size_t>(count / info.block_size) *
                            static_cast<std::size_t>(info.block_bytes);
  const Status status =
      dequantize(dtype, std::span(src, bytes), std::span(dst, static_cast<std::size_t>(count)));
  PAGODA_CHECK(status.ok()) << status.to_string();
}

}  // namespace pagoda::cpu
