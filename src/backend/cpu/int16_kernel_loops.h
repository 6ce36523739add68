// The ISA-neutral loops of the int16-activation kernels (matmul_int16_avx2.cc,
// matmul_int16_avx512.cc): compile-time block indices and row counts, and the walk over groups of
// weight rows. No intrinsics; internal linkage, as int16_blocks.h.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
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
[[gnu::always_inline]] inline void for_each_block(F&& f) {
  [&]<int... kJ>(std::integer_sequence<int, kJ...>) __attribute__((always_inline)) {
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

// The direct kernels' walk over weight rows [n_begin, n_end) of w: groups of up to kLanes rows, one
// per lane, each lane reading its own run of consecutive rows, so the hardware prefetcher sees
// kLanes long sequential streams:
//
//   stride = ceil((n_end - n_begin) / kLanes);  group g (0 <= g < stride), lane l: row
//   n_begin + l * stride + g, for the lanes where that is below n_end (a prefix of them)
//
// group(rows, count, stride, last) gets lane 0's row, the lane count and whether it is the
// range's last group. Consecutive rows per group (lane l: row n0 + l) read 16 rows a
// 1152-byte row apart (a 2048-column Q4_K) at each step, short streams that the prefetcher
// never ramps up on: one thread, cold, 7.0 GB/s on Llama-1B's Q4_K 2048x2048 against 10.5 with
// runs (docs/perf/llama_cpp.md, "Lane runs in the int16 direct kernel"). Ranges whose lane offsets
// would not fit the gathers' int32 are cut into pieces first.
template <std::int64_t kLanes, typename Group>
inline void for_each_lane_group(const std::uint8_t* w, std::size_t w_stride, std::int64_t n_begin,
                                std::int64_t n_end, Group&& group) {
  const auto max_rows = std::max<std::int64_t>(
      kLanes, static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::max() / w_stride) /
                  kLanes * kLanes);
  for (std::int64_t begin = n_begin; begin < n_end; begin += max_rows) {
    const std::int64_t length = std::min(max_rows, n_end - begin);
    const std::int64_t stride = (length + kLanes - 1) / kLanes;
    for (std::int64_t g = 0; g < stride; ++g) {
      const auto count =
          static_cast<int>(std::min<std::int64_t>(kLanes, (length - g + stride - 1) / stride));
      group(w + static_cast<std::size_t>(begin + g) * w_stride, begin + g, count, stride,
            g + 1 == stride);
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu::int16
