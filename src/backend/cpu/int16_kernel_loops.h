// The ISA-neutral loops of the int16-activation kernels (matmul_int16_avx2.cc,
// matmul_int16_avx512.cc): compile-time block indices and row counts, and the walk over groups of
// weight rows. No intrinsics; internal linkage, as int16_blocks.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "common/check.h"
#include "model/dtype.h"

namespace pagoda::cpu::int16 {
namespace {

// f(std::integral_constant<int, j>{}) for j = 0 .. kCount - 1: a group's block index as a
// constant, so the decoders' shifts and offsets are immediates (a shift by a register count costs
// a shuffle-port uop).
template <int kCount, typename F>
inline void for_each_block(F&& f) {
  [&]<int... kJ>(std::integer_sequence<int, kJ...>) {
    (f(std::integral_constant<int, kJ>{}), ...);
  }
  (std::make_integer_sequence<int, kCount>{});
}

// Rows of a K-quant are whole 256-weight groups (kBlockColumns: the contract's 32 columns).
template <typename Block, std::int64_t kBlockColumns>
void check_whole_groups(std::int64_t k) {
  PAGODA_CHECK_EQ(k % (Block::kGroupBlocks * kBlockColumns), 0)
      << dtype_name(Block::kType) << " rows of " << k << " columns";
}

// run(std::integral_constant<int, m>{}) for 1 <= m <= kMaxRows: the direct kernels take the rows
// of x as a template argument, so their accumulators live in registers.
template <int kMaxRows, int kRows = 1, typename Run>
inline void with_row_count(std::int64_t m, Run&& run) {
  if constexpr (kRows < kMaxRows) {
    if (m > kRows) return with_row_count<kMaxRows, kRows + 1>(m, std::forward<Run>(run));
  }
  PAGODA_CHECK(m == kRows) << "int16_direct takes 1 to " << kMaxRows << " rows, not " << m;
  run(std::integral_constant<int, kRows>{});
}

// group(n0, count, rows, next) for the weight rows [n_begin, n_end) of w in groups of kGroupRows:
// `rows` points at row n0, `next` at the following whole group (for prefetching) or is nullptr.
template <std::int64_t kGroupRows, typename Group>
inline void for_each_row_group(const std::uint8_t* w, std::size_t w_stride, std::int64_t n_begin,
                               std::int64_t n_end, Group&& group) {
  for (std::int64_t n0 = n_begin; n0 < n_end; n0 += kGroupRows) {
    const int count = static_cast<int>(std::min(kGroupRows, n_end - n0));
    const std::uint8_t* rows = w + static_cast<std::size_t>(n0) * w_stride;
    const std::uint8_t* next =
        n0 + 2 * kGroupRows <= n_end ? rows + kGroupRows * w_stride : nullptr;
    group(n0, count, rows, next);
  }
}

}  // namespace
}  // namespace pagoda::cpu::int16
