// The W4A16 dequantizer and gathers (kernels/gemm/w4a16_dequantize.cu) run on the CPU by the CUDA
// emulation (kernels/emulation/cuda_emulation.h) against the host layout's read-back
// (quant::w4a16_weight, through tests/gpu/w4a16_reference.h) and the gathers' oracles
// (tests/gpu/w4a16_dequantize_reference.h): every element of the zero-point and GGUF forms bit for
// bit, at row counts that are not a multiple of the 16-row tile, k not a multiple of the 64-column
// tile, groups of 16 to per channel, and rows gathered by id (out of range too) and columns by a
// permutation.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "kernels/gemm/w4a16_gemm.h"
#include "quant/gguf_repack.h"
#include "quant/w4a16_layout.h"
#include "tests/emulated/host_memory.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/w4a16_dequantize_reference.h"
#include "tests/gpu/w4a16_reference.h"
#include "tests/unit/backend/test_random.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using w4a16_testing::column_permutation;
using w4a16_testing::dense_weights;
using w4a16_testing::gathered_columns;
using w4a16_testing::gathered_rows;
using w4a16_testing::random_matrix;
using w4a16_testing::Shape;

using Array = emulated_test::HostArray;

// The kernels' view of a host matrix: its arrays in place (null where empty, as uploaded).
W4A16Weights view_of(const quant::W4A16Matrix& m) {
  const auto or_null = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
  return {.packed = m.packed.data(),
          .scales = m.scales.data(),
          .zeros = or_null(m.zeros),
          .rows = m.rows,
          .cols = m.cols,
          .group_size = m.group_size,
          .packed_hi = or_null(m.packed_hi),
          .scale_codes = or_null(m.scale_codes),
          .mins = or_null(m.mins),
          .min_codes = or_null(m.min_codes),
          .super_shift = m.super_shift,
          .code_zero = m.code_zero,
          .hi_bits = m.hi_bits};
}

// The tile layout's padding rows (rows .. padded_rows - 1) given NaN scales and mins: an output
// that reads one (a row past the matrix taken for a real one) is NaN, not a plausible zero.
quant::W4A16Matrix with_poisoned_padding(quant::W4A16Matrix w) {
  constexpr std::uint16_t kNaN = 0x7E00;
  const auto padded = static_cast<std::size_t>(w.padded_rows());
  for (std::vector<std::uint16_t>* v : {&w.scales, &w.mins}) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      if (static_cast<std::int64_t>(i % padded) >= w.rows) (*v)[i] = kNaN;
    }
  }
  return w;
}

constexpr ScalarType kTypes[] = {ScalarType::kBF16, ScalarType::kF16};

// Every element of launch_w4a16_dequantize's output is the exact weight rounded once.
void expect_dequantize_exact(const quant::W4A16Matrix& matrix, const std::string& what) {
  const quant::W4A16Matrix w = with_poisoned_padding(matrix);
  const std::vector<float> exact = dense_weights(w);
  for (const ScalarType type : kTypes) {
    SCOPED_TRACE(what + " " + gpu_test::name_of(type) + " " + std::to_string(w.rows) + "x" +
                 std::to_string(w.cols) + " group " + std::to_string(w.group_size));
    Array out(exact.size(), type);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(out.data()) % 16, 0u);
    const Status st = launch_w4a16_dequantize(view_of(w), out.data(), type, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const std::vector<float> got = out.values();
    const std::vector<float> want = gpu_test::round_to(exact, type);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "element " << i << " (row " << i / w.cols << ", col "
                                 << i % w.cols << ")";
    }
  }
}

std::vector<std::pair<std::string, quant::W4A16Matrix>> gguf_matrices(std::mt19937_64& rng) {
  struct GgufShape {
    DType dtype;
    std::int64_t n, k;
  };
  std::vector<std::pair<std::string, quant::W4A16Matrix>> matrices;
  for (const GgufShape& s : {GgufShape{DType::kQ4_1, 20, 1056}, GgufShape{DType::kQ4_K, 37, 512},
                             GgufShape{DType::kQ5_0, 17, 544}, GgufShape{DType::kQ5_1, 16, 96},
                             GgufShape{DType::kQ8_0, 9, 800}, GgufShape{DType::kQ5_K, 24, 512},
                             GgufShape{DType::kQ6_K, 9, 768}, GgufShape{DType::kQ2_K, 40, 256},
                             GgufShape{DType::kQ3_K, 33, 512}}) {
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, s.dtype, s.n, s.k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(s.dtype, bytes.data(), s.n, s.k);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    if (w.ok()) matrices.emplace_back(std::string(dtype_name(s.dtype)), std::move(*w));
  }
  // Parts of different types in the general form (a Q4_K_M QKV, plus a Q8_0 part).
  const std::int64_t k = 512;
  const auto a = cpu::testing::random_weights(rng, DType::kQ4_K, 20, k);
  const auto b = cpu::testing::random_weights(rng, DType::kQ6_K, 12, k);
  const auto c = cpu::testing::random_weights(rng, DType::kQ8_0, 5, k);
  const quant::GgufPart parts[] = {{DType::kQ4_K, a.data(), 20, a.size() / 20},
                                   {DType::kQ6_K, b.data(), 12, b.size() / 12},
                                   {DType::kQ8_0, c.data(), 5, c.size() / 5}};
  StatusOr<quant::W4A16Matrix> w = quant::repack_gguf_parts(parts, k);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (w.ok()) matrices.emplace_back("Q4_K+Q6_K+Q8_0", std::move(*w));
  return matrices;
}

// d (q - z) rounded once: groups of 32, 96, 128 and per channel, k past whole 64-column tiles.
TEST(EmulatedW4A16Dequantize, ZeroPointFormIsExactThenRoundedOnce) {
  std::mt19937_64 rng(3);
  for (const Shape& s :
       {Shape{100, 4128, 32}, Shape{37, 640, 640}, Shape{20, 1344, 96}, Shape{3, 4128, 128}}) {
    expect_dequantize_exact(random_matrix(rng, s), "Q4_Z");
  }
}

// (S sc) (q - code_zero) + B mc rounded as the CPU dequantizer, then once to the dtype: 4-bit
// codes with mins (Q4_1, Q4_K, Q2_K), wider codes in packed_hi (Q5_0, Q5_1, Q8_0, Q5_K, Q6_K,
// Q3_K), groups of 16 (Q6_K) and a stack of parts of different types.
TEST(EmulatedW4A16Dequantize, GgufFormIsExactThenRoundedOnce) {
  std::mt19937_64 rng(12);
  for (const auto& [name, w] : gguf_matrices(rng)) expect_dequantize_exact(w, name);
}

// A token table kept quantized: rows gathered by id are the dequantizer's rows bit for bit (times
// a scale in fp32, rounded once), ids out of range give zero rows (id == rows among them, which
// would read a padding row).
TEST(EmulatedW4A16Dequantize, GatherRowsAreTheDequantizersRows) {
  std::mt19937_64 rng(14);
  std::vector<std::pair<std::string, quant::W4A16Matrix>> tables;
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_1}) {
    const std::int64_t n = 40, k = 512;
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, dtype, n, k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(dtype, bytes.data(), n, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    tables.emplace_back(std::string(dtype_name(dtype)), with_poisoned_padding(std::move(*w)));
  }
  tables.emplace_back("Q4_Z", with_poisoned_padding(random_matrix(rng, Shape{37, 640, 128})));
  for (const auto& [name, w] : tables) {
    const std::vector<float> exact = dense_weights(w);
    const std::vector<std::int32_t> ids = {
        5, 0, static_cast<std::int32_t>(w.rows - 1), -1, static_cast<std::int32_t>(w.rows), 33, 5};
    const auto n_ids = static_cast<std::int64_t>(ids.size());
    for (const ScalarType type : kTypes) {
      for (const float scale : {1.0f, 25.25f}) {
        SCOPED_TRACE(name + " " + gpu_test::name_of(type) + " scale " + std::to_string(scale));
        Array out(static_cast<std::size_t>(n_ids * w.cols), type);
        const Status st = launch_w4a16_gather_rows(view_of(w), ids.data(), n_ids, scale, out.data(),
                                                   type, nullptr);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const std::vector<float> got = out.values();
        const std::vector<float> want = gathered_rows(exact, w.rows, w.cols, ids, scale, type);
        for (std::int64_t t = 0; t < n_ids; ++t) {
          for (std::int64_t c = 0; c < w.cols; ++c) {
            const auto e = static_cast<std::size_t>(t * w.cols + c);
            ASSERT_EQ(got[e], want[e])
                << "token " << t << " (id " << ids[static_cast<std::size_t>(t)] << ") col " << c;
          }
        }
      }
    }
  }
}

// Widths within one 256-thread block and past it (not a multiple of it), one row and several.
// (The GPU test's 65540 rows, past a grid's y dimension, would take the emulation minutes.)
TEST(EmulatedW4A16Dequantize, GatherColumnsFollowsThePermutation) {
  std::mt19937 rng(9);
  for (const ScalarType type : kTypes) {
    for (const auto& [m, k] :
         {std::pair<std::int64_t, std::int64_t>{5, 96}, {3, 300}, {1, 40}, {2, 520}}) {
      SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " m " + std::to_string(m) + " k " +
                   std::to_string(k));
      const std::vector<std::int32_t> perm = column_permutation(k);
      const std::vector<float> x =
          gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(m * k), rng), type);
      Array dx(x, type), out(x.size(), type);
      const Status st =
          launch_gather_columns(dx.data(), m, k, perm.data(), out.data(), type, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      EXPECT_EQ(out.values(), gathered_columns(x, m, k, perm));
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
