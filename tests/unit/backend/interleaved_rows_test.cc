// The interleaved weight layout (interleaved_rows.h): repacking loses nothing, the panels hold
// each unit where the header's table puts it, and every reader of rows outside the matmul
// (decode_row, embedding, embedding_reference) gives on an interleaved view exactly what it gives
// on the row-major one.
#include "backend/cpu/interleaved_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/embedding.h"
#include "backend/cpu/row_decoder.h"
#include "backend/cpu/thread_pool.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::bitwise_equal;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

constexpr DType kTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                            DType::kQ5_1, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
constexpr std::int64_t kRowCounts[] = {1, 15, 16, 17, 40};

// Two K per type: one and several groups (an odd count, so no pairing hides a mistake).
std::vector<std::int64_t> widths(DType dtype) {
  return dtype_info(dtype).block_size == 256 ? std::vector<std::int64_t>{256, 768}
                                             : std::vector<std::int64_t>{32, 160};
}

std::string name(DType dtype, std::int64_t rows, std::int64_t k) {
  return std::string(dtype_name(dtype)) + " rows=" + std::to_string(rows) +
         " k=" + std::to_string(k);
}

TEST(InterleavedRowsTest, DeinterleavingGivesBackTheFileBytes) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 60);
  for (DType dtype : kTypes) {
    for (std::int64_t k : widths(dtype)) {
      for (std::int64_t n : kRowCounts) {
        SCOPED_TRACE(name(dtype, n, k));
        const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k, 3);
        const TensorView rows = dense_view(bytes.data() + 3, dtype, n, k);
        const InterleavedMatrix panels = interleave_rows(rows);
        const std::int64_t padded = (n + 15) / 16 * 16;
        ASSERT_EQ(panels.bytes.size(), static_cast<std::size_t>(padded) * rows.row_stride);
        EXPECT_TRUE(panels.view.interleaved);
        EXPECT_EQ(panels.view.data, panels.bytes.data());
        EXPECT_EQ(panels.view.row_stride, rows.row_stride);
        EXPECT_EQ(panels.view.num_rows, n);
        EXPECT_EQ(panels.view.num_cols, k);
        // The whole matrix, a panel's last row, a range across a panel boundary, the last row.
        for (auto [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, n},
                                  {std::min<std::int64_t>(15, n - 1), n},
                                  {std::min<std::int64_t>(n, 14), std::min<std::int64_t>(n, 18)},
                                  {n / 2, n},
                                  {n - 1, n},
                                  {n, n}}) {
          if (begin > end) continue;
          SCOPED_TRACE("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
          std::vector<std::uint8_t> got(static_cast<std::size_t>(end - begin) * rows.row_stride,
                                        0xA5);
          deinterleave_rows(panels.view, begin, end, got.data());
          EXPECT_EQ(0, std::memcmp(got.data(), rows.row(begin), got.size()));
        }
        std::vector<std::uint8_t> scratch;
        for (std::int64_t r = 0; r < n; ++r) {
          ASSERT_EQ(0, std::memcmp(gguf_row(panels.view, r, scratch), rows.row(r), rows.row_stride))
              << "row " << r;
          EXPECT_EQ(gguf_row(rows, r, scratch), rows.row(r)) << "a row-major row is used in place";
        }
      }
    }
  }
}

// The header's table written out again, so a table changed in interleaved_rows.cc alone fails.
struct Segment {
  int offset, bytes, unit;
};

std::vector<Segment> spec(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0: return {{0, 2, 2}, {2, 32, 4}};
    case DType::kQ4_0: return {{0, 2, 2}, {2, 16, 4}};
    case DType::kQ4_1: return {{0, 2, 2}, {2, 2, 2}, {4, 16, 4}};
    case DType::kQ5_0: return {{0, 2, 2}, {2, 4, 4}, {6, 16, 4}};
    case DType::kQ5_1: return {{0, 2, 2}, {2, 2, 2}, {4, 4, 4}, {8, 16, 4}};
    case DType::kQ4_K: return {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}};
    case DType::kQ5_K: return {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 32, 4}, {48, 128, 4}};
    case DType::kQ6_K:
      return {{208, 2, 2}, {192, 16, 1}, {0, 64, 4}, {128, 32, 4}, {64, 64, 4}, {160, 32, 4}};
    default: return {};
  }
}

TEST(InterleavedRowsTest, PanelsFollowTheHeadersTable) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 61);
  for (DType dtype : kTypes) {
    const std::vector<Segment> segments = spec(dtype);
    std::size_t group = 0;
    for (const Segment& s : segments) group += static_cast<std::size_t>(s.bytes);
    ASSERT_EQ(group, static_cast<std::size_t>(dtype_info(dtype).block_bytes));
    ASSERT_EQ(interleave_segments(dtype).size(), segments.size());
    for (std::int64_t k : widths(dtype)) {
      for (std::int64_t n : kRowCounts) {
        SCOPED_TRACE(name(dtype, n, k));
        const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
        const TensorView rows = dense_view(bytes.data(), dtype, n, k);
        const InterleavedMatrix panels = interleave_rows(rows);
        const std::size_t panel_bytes = 16 * rows.row_stride;
        const std::size_t groups = rows.row_stride / group;
        // Every byte of a panel's row r, group g: segment s's unit i at (i * 16 + r) * unit.
        std::vector<bool> written(panels.bytes.size(), false);
        for (std::int64_t row = 0; row < n; ++row) {
          const std::uint8_t* panel = panels.bytes.data() + (row / 16) * panel_bytes;
          const auto r = static_cast<std::size_t>(row % 16);
          for (std::size_t g = 0; g < groups; ++g) {
            std::size_t at = g * 16 * group;
            for (const Segment& s : segments) {
              const auto unit = static_cast<std::size_t>(s.unit);
              for (std::size_t i = 0; i < static_cast<std::size_t>(s.bytes) / unit; ++i) {
                const std::size_t to = at + (i * 16 + r) * unit;
                const std::size_t from = g * group + static_cast<std::size_t>(s.offset) + i * unit;
                ASSERT_EQ(0, std::memcmp(panel + to, rows.row(row) + from, unit))
                    << "row " << row << " group " << g << " row byte " << from;
                for (std::size_t b = 0; b < unit; ++b) {
                  written[(row / 16) * panel_bytes + to + b] = true;
                }
              }
              at += 16 * static_cast<std::size_t>(s.bytes);
            }
          }
        }
        // What no row wrote is padding: the zero rows past the matrix.
        for (std::size_t i = 0; i < written.size(); ++i) {
          if (!written[i]) {
            ASSERT_EQ(panels.bytes[i], 0) << "padding byte " << i;
          }
        }
      }
    }
  }
}

// A few units placed by hand from the table, so an error shared by the table and the loop above
// (the order of the segments, the unit's stride) fails too.
TEST(InterleavedRowsTest, UnitsSitWhereTheTableSaysByHand) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 62);
  struct Unit {
    DType dtype;
    std::int64_t row;        // of the matrix
    std::size_t panel_byte;  // in the whole interleaved matrix
    std::size_t row_byte;    // in the GGUF row
    std::size_t bytes;
  };
  // Rows of 2 groups; row 17 is row 1 of panel 1, which starts at 16 * 2 * group bytes.
  const Unit units[] = {
      // Q8_0, group 34: d at r * 2; qs from 32, unit i of row r at 32 + (i * 16 + r) * 4.
      {DType::kQ8_0, 5, 10, 0, 2},
      {DType::kQ8_0, 5, 32 + (16 + 5) * 4, 2 + 4, 4},
      {DType::kQ8_0, 0, 16 * 34, 34, 2},                 // group 1's d
      {DType::kQ8_0, 17, 16 * 68 + 16 * 34 + 2, 34, 2},  // panel 1, row 1, group 1's d
      // Q4_0, group 18: row 15's last qs unit fills the group's last 4 bytes.
      {DType::kQ4_0, 15, 16 * 18 - 4, 14, 4},
      // Q4_1, group 20: m after the 16 d, qs after the 16 m.
      {DType::kQ4_1, 4, 32 + 4 * 2, 2, 2},
      {DType::kQ4_1, 4, 64 + 4 * 4, 4, 4},
      // Q5_0, group 22: qh after the 16 d (one unit), qs after the 16 qh.
      {DType::kQ5_0, 6, 32 + 6 * 4, 2, 4},
      {DType::kQ5_0, 6, 96 + (3 * 16 + 6) * 4, 6 + 12, 4},
      // Q5_1, group 24: d, m, qh at 64, qs at 128.
      {DType::kQ5_1, 11, 64 + 11 * 4, 4, 4},
      {DType::kQ5_1, 11, 128 + 11 * 4, 8, 4},
      // Q4_K, group 144: d, dmin, scales at 64 (3 units), qs at 64 + 16 * 12 = 256.
      {DType::kQ4_K, 3, 32 + 3 * 2, 2, 2},
      {DType::kQ4_K, 7, 64 + (2 * 16 + 7) * 4, 4 + 8, 4},
      {DType::kQ4_K, 0, 256, 16, 4},
      {DType::kQ4_K, 17, 16 * 288 + 16 * 144 + 256 + (31 * 16 + 1) * 4, 144 + 16 + 124, 4},
      // Q5_K, group 176: Q4_K's header, then qh at 256 (8 units), qs at 256 + 16 * 32 = 768.
      {DType::kQ5_K, 5, 256 + (2 * 16 + 5) * 4, 16 + 8, 4},
      {DType::kQ5_K, 0, 768, 48, 4},
      // Q6_K, group 210: d (row bytes 208..) first, then the 16 one-byte scales of each row,
      // then the first 128-column half's ql and qh, then the second's.
      {DType::kQ6_K, 9, 18, 208, 2},
      {DType::kQ6_K, 9, 32 + 3 * 16 + 9, 195, 1},
      {DType::kQ6_K, 2, 288 + (16 + 2) * 4, 4, 4},
      {DType::kQ6_K, 15, 1312 + 15 * 4, 128, 4},
      {DType::kQ6_K, 1, 1824 + 4, 64, 4},
      {DType::kQ6_K, 0, 2848 + 7 * 16 * 4, 188, 4},
  };
  for (const Unit& u : units) {
    SCOPED_TRACE(std::string(dtype_name(u.dtype)) + " row " + std::to_string(u.row) + " row byte " +
                 std::to_string(u.row_byte));
    const std::int64_t k = 2 * dtype_info(u.dtype).block_size;
    const std::vector<std::uint8_t> bytes = random_weights(rng, u.dtype, 20, k);
    const TensorView rows = dense_view(bytes.data(), u.dtype, 20, k);
    const InterleavedMatrix panels = interleave_rows(rows);
    ASSERT_LE(u.panel_byte + u.bytes, panels.bytes.size());
    EXPECT_EQ(
        0, std::memcmp(panels.bytes.data() + u.panel_byte, rows.row(u.row) + u.row_byte, u.bytes));
  }
}

TEST(InterleavedRowsTest, RowReadersAsOnRows) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 63);
  for (DType dtype : kTypes) {
    const std::int64_t block = dtype_info(dtype).block_size;
    for (std::int64_t k : widths(dtype)) {
      for (std::int64_t n : kRowCounts) {
        SCOPED_TRACE(name(dtype, n, k));
        const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
        const TensorView rows = dense_view(bytes.data(), dtype, n, k);
        const InterleavedMatrix panels = interleave_rows(rows);
        // decode_row: whole rows, and a block range inside the row (the last block, and from
        // block 1 when there are more).
        std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {{0, k}, {k - block, block}};
        if (k >= 3 * block) ranges.push_back({block, k - 2 * block});
        for (std::int64_t r = 0; r < n; ++r) {
          for (auto [col_begin, count] : ranges) {
            std::vector<float> want(static_cast<std::size_t>(count));
            std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
            decode_row(rows, r, col_begin, count, want.data());
            decode_row(panels.view, r, col_begin, count, got.data());
            ASSERT_TRUE(bitwise_equal(got, want))
                << "row " << r << " cols [" << col_begin << ", +" << count << ")";
          }
        }
        // Both embeddings, with repeats and the last row (in a part-empty panel).
        std::vector<std::int32_t> ids = {0, static_cast<std::int32_t>(n - 1),
                                         static_cast<std::int32_t>(n / 2), 0};
        const auto size = ids.size() * static_cast<std::size_t>(k);
        std::vector<float> want(size), got(size, std::numeric_limits<float>::quiet_NaN());
        const auto num_ids = static_cast<std::int64_t>(ids.size());
        embedding_reference(rows, ids.data(), num_ids, want.data());
        embedding_reference(panels.view, ids.data(), num_ids, got.data());
        EXPECT_TRUE(bitwise_equal(got, want)) << "embedding_reference";
        got.assign(size, std::numeric_limits<float>::quiet_NaN());
        embedding(panels.view, ids.data(), num_ids, got.data());
        EXPECT_TRUE(bitwise_equal(got, want)) << "embedding";
      }
    }
  }
}

// decode_row deinterleaves into a per-thread scratch: rows decoded on several threads at once
// stay each their own.
TEST(InterleavedRowsTest, DecodeRowOnManyThreads) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 64);
  ThreadPool pool(3);
  const std::int64_t n = 200, k = 512;
  for (DType dtype : {DType::kQ4_K, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, n, k);
    const TensorView rows = dense_view(bytes.data(), dtype, n, k);
    const InterleavedMatrix panels = interleave_rows(rows);
    std::vector<float> want(static_cast<std::size_t>(n * k));
    std::vector<float> got(want.size(), std::numeric_limits<float>::quiet_NaN());
    for (std::int64_t r = 0; r < n; ++r) decode_row(rows, r, 0, k, want.data() + r * k);
    for (int repeat = 0; repeat < 5; ++repeat) {
      pool.parallel_for(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          decode_row(panels.view, r, 0, k, got.data() + r * k);
        }
      });
      ASSERT_TRUE(bitwise_equal(got, want));
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
