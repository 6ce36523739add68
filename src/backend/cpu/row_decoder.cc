#include "backend/cpu/row_decoder.h"

#include <algorithm>
#include <span>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/kquant_blocks_avx2.h"
#include "backend/cpu/matmul_avx2.h"
#include "backend/cpu/matmul_avx512.h"
#include "backend/cpu/quant_blocks_avx2.h"
#include "common/check.h"
#include "model/dequantize.h"

namespace pagoda::cpu {

namespace {

// The GGUF bytes of blocks [first_block, first_block + num_blocks) of row `row` of the
// interleaved `t`, deinterleaved into a per-thread scratch. A panel stores its 16 rows group by
// group (a group is one block), so those blocks of the row's panel are one run of bytes, which
// is itself the panel of a matrix num_blocks blocks wide:
//
//   panel row / 16:  | group 0 | ... | group first_block .. + num_blocks - 1 | ... |
//                                      '-- 16 * num_blocks * block_bytes --'
const std::uint8_t* interleaved_blocks(const TensorView& t, std::int64_t row,
                                       std::int64_t first_block, std::int64_t num_blocks) {
  thread_local std::vector<std::uint8_t> scratch;
  const auto block_bytes = static_cast<std::size_t>(dtype_info(t.dtype).block_bytes);
  const std::int64_t panel = row / kInterleavedRows;
  TensorView run = t;
  run.data = static_cast<const std::uint8_t*>(t.data) +
             static_cast<std::size_t>(panel * kInterleavedRows) * t.row_stride +
             static_cast<std::size_t>(first_block * kInterleavedRows) * block_bytes;
  run.num_rows = std::min(kInterleavedRows, t.num_rows - panel * kInterleavedRows);
  run.num_cols = num_blocks * dtype_info(t.dtype).block_size;
  run.row_stride = static_cast<std::size_t>(num_blocks) * block_bytes;
  scratch.resize(run.row_stride);
  deinterleave_rows(run, row % kInterleavedRows, row % kInterleavedRows + 1, scratch.data());
  return scratch.data();
}

}  // namespace

void decode_row(const TensorView& t, std::int64_t row, std::int64_t col_begin, std::int64_t count,
                float* dst) {
  const DTypeInfo& info = dtype_info(t.dtype);
  PAGODA_CHECK(col_begin % info.block_size == 0 && count % info.block_size == 0)
      << "[" << col_begin << ", +" << count << ") splits a " << info.name << " block";
  PAGODA_CHECK(row >= 0 && row < t.num_rows && col_begin >= 0 && col_begin + count <= t.num_cols)
      << "row " << row << " cols [" << col_begin << ", +" << count << ") outside [" << t.num_rows
      << ", " << t.num_cols << "]";
  if (t.interleaved) {
    decode_blocks(t.dtype,
                  interleaved_blocks(t, row, col_begin / info.block_size, count / info.block_size),
                  count, dst);
    return;
  }
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
