// The direct kernels' walk over weight rows (int16_kernel_loops.h): every row of the range once,
// lanes a prefix of each group, each lane's rows consecutive, the last group flagged, and ranges
// whose lane offsets would overflow the gathers' int32 cut into pieces.
#include "backend/cpu/int16_kernel_loops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace pagoda::cpu {
namespace {

struct Walk {
  std::vector<int> visits;        // per row of [0, n_end)
  std::int64_t max_offset = 0;    // largest lane offset from a group's first row, in bytes
  int last_groups = 0;            // groups flagged last
  bool lanes_consecutive = true;  // each group's lanes read the rows after the previous group's
};

template <std::int64_t kLanes>
Walk walk(std::int64_t n_begin, std::int64_t n_end, std::size_t w_stride) {
  Walk out;
  out.visits.assign(static_cast<std::size_t>(n_end), 0);
  const auto* base = reinterpret_cast<const std::uint8_t*>(std::uintptr_t{1} << 20);
  std::int64_t previous_n = -1;  // the previous group's first row, -1 after a range's last group
  std::int64_t previous_stride = 0;
  int16::for_each_lane_group<kLanes>(
      base, w_stride, n_begin, n_end,
      [&](const std::uint8_t* rows, std::int64_t n, int count, std::int64_t stride, bool last) {
        EXPECT_EQ(rows, base + static_cast<std::size_t>(n) * w_stride);
        EXPECT_TRUE(count >= 1 && count <= kLanes) << count;
        for (int l = 0; l < count; ++l) {
          const std::int64_t row = n + l * stride;
          ASSERT_TRUE(row >= n_begin && row < n_end) << row;
          ++out.visits[static_cast<std::size_t>(row)];
          out.max_offset = std::max<std::int64_t>(out.max_offset,
                                                  l * stride * static_cast<std::int64_t>(w_stride));
        }
        if (previous_n >= 0) {
          out.lanes_consecutive &= n == previous_n + 1 && stride == previous_stride;
        }
        previous_n = last ? -1 : n;
        previous_stride = stride;
        out.last_groups += last ? 1 : 0;
      });
  return out;
}

TEST(Int16KernelLoopsTest, LaneGroupsVisitEveryRowOnceInRuns) {
  for (std::int64_t n_begin : {0, 16, 48}) {
    for (std::int64_t length = 1; length <= 150; ++length) {
      SCOPED_TRACE(std::to_string(n_begin) + " + " + std::to_string(length));
      const Walk w16 = walk<16>(n_begin, n_begin + length, 144);
      const Walk w8 = walk<8>(n_begin, n_begin + length, 144);
      for (const Walk* w : {&w16, &w8}) {
        for (std::int64_t r = 0; r < n_begin + length; ++r) {
          EXPECT_EQ(w->visits[static_cast<std::size_t>(r)], r < n_begin ? 0 : 1) << "row " << r;
        }
        EXPECT_EQ(w->last_groups, 1);
        EXPECT_TRUE(w->lanes_consecutive);
      }
    }
  }
}

TEST(Int16KernelLoopsTest, LaneOffsetsFitTheGathersInt32) {
  // 100 MB rows: pieces of 16 rows, one per lane (offsets up to 15 rows, as before the runs).
  const std::size_t huge = 100u << 20;
  const Walk w = walk<16>(0, 70, huge);
  for (int v : w.visits) EXPECT_EQ(v, 1);
  EXPECT_EQ(w.max_offset, static_cast<std::int64_t>(15 * huge));
  // 1 MB rows: pieces of 2032 rows (2^31 / 2^20 rounded down to 16s), lane offsets within int32.
  const Walk big = walk<16>(0, 5000, 1u << 20);
  for (int v : big.visits) EXPECT_EQ(v, 1);
  EXPECT_LE(big.max_offset, std::numeric_limits<std::int32_t>::max());
  EXPECT_EQ(big.last_groups, 3);
}

}  // namespace
}  // namespace pagoda::cpu
