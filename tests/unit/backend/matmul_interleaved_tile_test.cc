// The prefill tiles on interleaved weights read the panels in place and give int16_tile's bits on
// the row-major rows: the AVX-512 one (matmul_int16_avx512.h) at every first row (tiles of 6 rows
// straddle panels, tiles at the end leave panels part empty), the AVX2 one (matmul_int16_avx2.h)
// at every first row and row count inside a panel (past 32 rows of x it reads them deinterleaved,
// deinterleave_panel_avx2, except the int8 tile's K-quant panels); so kBroadcastInt16 on an
// interleaved matrix is kBroadcastInt16 on the row-major one (under PAGODA_CPU_ISA=avx2, the AVX2
// tile's).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/matmul_broadcast_avx512.h"
#include "backend/cpu/matmul_int16_avx2.h"
#include "backend/cpu/matmul_int16_avx512.h"
#include "backend/cpu/thread_pool.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::activations;
using testing::random_floats;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

bool bitwise_equal(const float* a, const float* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

struct Case {
  DType dtype;
  std::int64_t k;
};

// One-block types at an odd block count and more, K-quants at 1 and 2 super-blocks.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {DType::kQ8_0, 96},  {DType::kQ8_0, 288}, {DType::kQ4_0, 96},  {DType::kQ4_0, 288},
      {DType::kQ4_1, 96},  {DType::kQ4_1, 288}, {DType::kQ5_0, 96},  {DType::kQ5_0, 288},
      {DType::kQ5_1, 96},  {DType::kQ5_1, 288}, {DType::kQ4_K, 256}, {DType::kQ4_K, 512},
      {DType::kQ5_K, 256}, {DType::kQ5_K, 512}, {DType::kQ6_K, 256}, {DType::kQ6_K, 512}};
  return all;
}

// Weight row counts: one row, part of a panel, one panel, a panel and a row, and longer runs whose
// last panel is part empty.
constexpr std::int64_t kWeightRows[] = {1, 5, 16, 17, 33, 47};

class MatmulInterleavedTileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2()) GTEST_SKIP() << "the int16 tiles need AVX2";
  }
};

// Every first row n0 (not only multiples of the tile), so each lane a tile can start at, in one
// panel or across two, is read.
TEST_F(MatmulInterleavedTileTest, TileIsTheRowMajorTileBitForBit) {
  if (!cpu_has_avx512_vnni()) GTEST_SKIP() << "the AVX-512 tile needs AVX-512 VNNI";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 51);
  for (const Case& c : cases()) {
    for (std::int64_t n : kWeightRows) {
      const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k, 1);
      const TensorView rows = dense_view(bytes.data() + 1, c.dtype, n, c.k);
      const InterleavedMatrix panels = interleave_rows(rows);
      for (std::int64_t vectors : {1, 2}) {
        const std::int64_t m = 16 * vectors;
        const std::int64_t width = 16 * vectors;
        const std::vector<float> x = activations(rng, m, c.k);
        std::vector<float> xt(static_cast<std::size_t>(c.k * width));
        avx512::transpose_to_columns(x.data(), m, c.k, vectors, xt.data());
        std::vector<std::int32_t> pairs(static_cast<std::size_t>(c.k / 2 * width));
        std::vector<float> scales(static_cast<std::size_t>(c.k / avx512::kInt16Block * width));
        std::vector<float> sums(scales.size());
        avx512::quantize_columns_int16(xt.data(), c.k, vectors, pairs.data(), scales.data(),
                                       sums.data());
        const std::int64_t tile_rows = avx512::int16_tile_rows(vectors);
        const auto tile_floats = static_cast<std::size_t>(tile_rows * width);
        for (std::int64_t n0 = 0; n0 < n; ++n0) {
          const std::int64_t count = std::min(tile_rows, n - n0);
          SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " k=" + std::to_string(c.k) +
                       " n=" + std::to_string(n) + " vectors=" + std::to_string(vectors) +
                       " n0=" + std::to_string(n0));
          std::vector<float> want(tile_floats, 0.0f);
          std::vector<float> got(tile_floats, 0.0f);
          avx512::int16_tile(c.dtype, pairs.data(), scales.data(), sums.data(), vectors, c.k,
                             rows.row(n0), rows.row_stride, count, nullptr, 0, want.data());
          avx512::int16_tile_interleaved(c.dtype, pairs.data(), scales.data(), sums.data(), vectors,
                                         c.k, static_cast<const std::uint8_t*>(panels.view.data),
                                         panels.view.row_stride, n0, count, got.data());
          // The tile's rows; the rows past count hold sums the caller drops.
          EXPECT_TRUE(
              bitwise_equal(got.data(), want.data(), static_cast<std::size_t>(count * width)));
        }
      }
    }
  }
}

// The AVX2 tile keeps its tiles inside panels (no masked loads): every first lane with every row
// count it may take there, so each shift of its 8-lane window is read.
TEST_F(MatmulInterleavedTileTest, Avx2TileIsTheRowMajorTileBitForBit) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 53);
  for (const Case& c : cases()) {
    for (std::int64_t n : kWeightRows) {
      const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k, 1);
      const TensorView rows = dense_view(bytes.data() + 1, c.dtype, n, c.k);
      const InterleavedMatrix panels = interleave_rows(rows);
      for (std::int64_t vectors : {1, 2}) {
        const std::int64_t m = 8 * vectors;
        const std::int64_t width = 8 * vectors;
        const std::vector<float> x = activations(rng, m, c.k);
        std::vector<std::int32_t> pairs(static_cast<std::size_t>(c.k / 2 * width));
        std::vector<float> scales(static_cast<std::size_t>(c.k / avx2::kInt16Block * width));
        std::vector<float> sums(scales.size());
        avx2::quantize_columns_int16(x.data(), m, c.k, vectors, pairs.data(), scales.data(),
                                     sums.data());
        const std::int64_t tile_rows = avx2::int16_panel_tile_rows(vectors);
        const auto tile_floats = static_cast<std::size_t>(avx2::int16_tile_rows(vectors) * width);
        for (std::int64_t n0 = 0; n0 < n; ++n0) {
          const std::int64_t lane = n0 % kInterleavedRows;
          const std::int64_t most = std::min({tile_rows, kInterleavedRows - lane, n - n0});
          for (std::int64_t count = 1; count <= most; ++count) {
            SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " k=" + std::to_string(c.k) +
                         " n=" + std::to_string(n) + " vectors=" + std::to_string(vectors) +
                         " n0=" + std::to_string(n0) + " count=" + std::to_string(count));
            std::vector<float> want(tile_floats, 0.0f);
            std::vector<float> got(tile_floats, 0.0f);
            avx2::int16_tile(c.dtype, pairs.data(), scales.data(), sums.data(), vectors, c.k,
                             rows.row(n0), rows.row_stride, count, nullptr, 0, want.data());
            avx2::int16_tile_interleaved(c.dtype, pairs.data(), scales.data(), sums.data(), vectors,
                                         c.k, static_cast<const std::uint8_t*>(panels.view.data),
                                         panels.view.row_stride, n0, count, got.data());
            EXPECT_TRUE(
                bitwise_equal(got.data(), want.data(), static_cast<std::size_t>(count * width)));
          }
        }
      }
    }
  }
}

// The AVX2 tile's rows past kAvx2PanelsInPlaceMaxRows rows of x: deinterleave_panel_avx2 gives
// deinterleave_rows's bytes, for every panel of matrices whose last panel is part empty and whose
// runs are and are not whole multiples of 8 units.
TEST_F(MatmulInterleavedTileTest, Avx2PanelDeinterleaveIsDeinterleaveRows) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 54);
  for (const Case& c : cases()) {
    for (std::int64_t n : kWeightRows) {
      SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " k=" + std::to_string(c.k) +
                   " n=" + std::to_string(n));
      const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k);
      const TensorView rows = dense_view(bytes.data(), c.dtype, n, c.k);
      const InterleavedMatrix panels = interleave_rows(rows);
      const std::size_t panel_bytes = rows.row_stride * kInterleavedRows;
      for (std::int64_t p = 0; p * kInterleavedRows < n; ++p) {
        const std::int64_t first = p * kInterleavedRows;
        const std::int64_t count = std::min(kInterleavedRows, n - first);
        std::vector<std::uint8_t> want(panel_bytes, 0xAB), got(panel_bytes, 0xAB);
        deinterleave_rows(panels.view, first, first + count, want.data());
        deinterleave_panel_avx2(panels.view, p, got.data());
        EXPECT_EQ(got, want) << "panel " << p;
      }
    }
  }
}

// With int16 and with int8 activations (on AVX-512 VNNI the int8 tile's panel reader).
TEST_F(MatmulInterleavedTileTest, BroadcastInt16AsOnRows) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 52);
  ThreadPool pool(3);
  const CpuActivations asked = cpu_activations();
  for (const bool int8 : {false, true}) {
    SCOPED_TRACE(int8 ? "int8 activations" : "int16 activations");
    set_cpu_activations(int8 ? CpuActivations::kInt8 : CpuActivations::kInt16);
    for (const Case& c : cases()) {
      for (std::int64_t n : kWeightRows) {
        const std::vector<std::uint8_t> bytes = random_weights(rng, c.dtype, n, c.k);
        const TensorView rows = dense_view(bytes.data(), c.dtype, n, c.k);
        const InterleavedMatrix panels = interleave_rows(rows);
        const std::vector<float> bias = random_floats(rng, static_cast<std::size_t>(n));
        for (std::int64_t m : {9, 16, 17, 32, 40, 47}) {
          SCOPED_TRACE(std::string(dtype_name(c.dtype)) + " k=" + std::to_string(c.k) +
                       " n=" + std::to_string(n) + " m=" + std::to_string(m));
          const std::vector<float> x = activations(rng, m, c.k);
          std::vector<float> want(static_cast<std::size_t>(m * n), -1.0f);
          std::vector<float> got(want.size(), -2.0f);
          matmul(pool, x.data(), m, rows, bias.data(), want.data(), MatmulKernel::kBroadcastInt16);
          matmul(pool, x.data(), m, panels.view, bias.data(), got.data(),
                 MatmulKernel::kBroadcastInt16);
          EXPECT_TRUE(bitwise_equal(got.data(), want.data(), want.size()));
        }
      }
    }
  }
  set_cpu_activations(asked);
}

}  // namespace
}  // namespace pagoda::cpu
