// The W4A16 GEMM against a float64 product of the same numbers: x rounded to the 16-bit dtype,
// the weights read back exactly from the host layout (quant/w4a16_layout.h), which the CPU test
// checks against the reference dequantizer. Awkward sizes throughout: m in {1, 7, 16, 33, 64,
// 257} (every m-tile count, partial tiles), n not a multiple of 16, k not a multiple of the
// 64-column tile, groups of 32, 64, 128 and per channel, asymmetric zeros, bias, K split over
// CTAs (with a workspace) and not (without).
//
// Tolerance: each product x (q - z) is exact in the tensor cores' fp32; per group the sum is
// fp32, then scaled (exact scale, one rounding) and summed in fp32 over groups and warps, then
// rounded once to the output. So |got - ref| <= u_out |ref| + c * 2^-24 * sum |x w| with c the
// number of additions on the longest path (< k / 8 + 64 here); a wrong fragment, group or tile
// is off by whole |x w| terms. The GGUF form (Q4_1, Q4_K: 4-bit codes; Q5_0, Q5_1, Q8_0, Q5_K,
// Q6_K: 8-bit) adds x's group sum times the min term B mc to each group, so there sum |x w|
// becomes sum |x| (|S sc (q - z)| + |B mc|): the two terms are rounded apart.
#include "kernels/gemm/w4a16_gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "backend/cuda/blas_lt.h"
#include "kernels/gemm/w4a16_linear.h"
#include "model/dequantize.h"
#include "quant/gguf_repack.h"
#include "quant/w4a16_layout.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/w4a16_dequantize_reference.h"
#include "tests/gpu/w4a16_reference.h"
#include "tests/unit/backend/test_random.h"
#include "tests/unit/quant/random_quant_blocks.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;

struct DeviceW4A16 {
  explicit DeviceW4A16(const quant::W4A16Matrix& m)
      : packed(m.packed),
        scales(m.scales),
        zeros(m.zeros),
        packed_hi(m.packed_hi),
        scale_codes(m.scale_codes),
        mins(m.mins),
        min_codes(m.min_codes) {
    const auto or_null = [](const auto& host, const auto& device) {
      return host.empty() ? nullptr : device.data();
    };
    view = {.packed = packed.data(),
            .scales = scales.data(),
            .zeros = or_null(m.zeros, zeros),
            .rows = m.rows,
            .cols = m.cols,
            .group_size = m.group_size,
            .packed_hi = or_null(m.packed_hi, packed_hi),
            .scale_codes = or_null(m.scale_codes, scale_codes),
            .mins = or_null(m.mins, mins),
            .min_codes = or_null(m.min_codes, min_codes),
            .super_shift = m.super_shift,
            .code_zero = m.code_zero,
            .hi_bits = m.hi_bits};
  }
  DeviceVector<std::uint32_t> packed;
  DeviceVector<std::uint16_t> scales;
  DeviceVector<std::uint8_t> zeros;
  DeviceVector<std::uint32_t> packed_hi;
  DeviceVector<std::int8_t> scale_codes;
  DeviceVector<std::uint16_t> mins;
  DeviceVector<std::int8_t> min_codes;
  W4A16Weights view;
};

using w4a16_testing::column_permutation;
using w4a16_testing::dense_weights;
using w4a16_testing::expect_matches_reference;
using w4a16_testing::gathered_columns;
using w4a16_testing::gathered_rows;
using w4a16_testing::min_terms;
using w4a16_testing::random_matrix;
using w4a16_testing::Shape;

TEST(GpuW4A16Gemm, MatchesFloat64ReferenceAtAwkwardSizes) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(20261127);
  std::mt19937 rng32(5);
  // On the emulation: groups of 32, 96, 64 and 128 (whole tiles, several per row) and per
  // channel, at sizes fibers run in seconds.
  for (const Shape& s : gpu_test::pick<Shape>(
           {{100, 4128, 32}, {256, 1024, 128}, {48, 2080, 2080}, {37, 640, 64}, {16, 64, 32}},
           {{37, 1056, 32}, {20, 1344, 96}, {24, 1088, 64}, {48, 2176, 128}, {16, 640, 640}})) {
    const quant::W4A16Matrix w = random_matrix(rng, s);
    const std::vector<float> dense = dense_weights(w);
    const DeviceW4A16 dw(w);
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (std::int64_t m :
           gpu_test::pick<std::int64_t>({1, 7, 16, 33, 64, 257}, {1, 7, 16, 33, 64})) {
        const std::string what = std::string(gpu_test::name_of(type)) + " m=" + std::to_string(m) +
                                 " " + std::to_string(s.n) + "x" + std::to_string(s.k) + " group " +
                                 std::to_string(s.group_size);
        SCOPED_TRACE(what);
        const std::vector<float> x = gpu_test::round_to(
            gpu_test::random_vector(static_cast<std::size_t>(m * s.k), rng32), type);
        const std::vector<float> bias =
            gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(s.n), rng32), type);
        const bool with_bias = m % 2 == 1;
        DeviceArray dx(x, type), db(bias, type);
        const std::size_t ws_bytes = w4a16_gemm_workspace_bytes(m, s.n, s.k);
        DeviceVector<float> workspace(std::max<std::size_t>(ws_bytes / sizeof(float), 1));
        const std::int64_t counter_count = w4a16_gemm_counter_count(m, s.n);
        DeviceVector<int> counters(std::vector<int>(static_cast<std::size_t>(counter_count), 0));
        // Without a workspace (no K split); with the planned one, the splits added by the
        // reduction kernel; and by the last CTA of each tile (counters): the same bits.
        std::vector<float> reduced_by_kernel;
        for (const char* way : {"unsplit", "split", "split in-kernel"}) {
          const bool split = way[0] == 's', in_kernel = way[5] == ' ';
          DeviceArray dy(static_cast<std::size_t>(m * s.n), type);
          dy.poison();
          const W4A16GemmParams p{.x = dx.data(),
                                  .w = dw.view,
                                  .bias = with_bias ? db.data() : nullptr,
                                  .y = dy.data(),
                                  .m = m,
                                  .dtype = type,
                                  .workspace = split ? workspace.data() : nullptr,
                                  .workspace_bytes = split ? ws_bytes : 0,
                                  .counters = in_kernel ? counters.data() : nullptr,
                                  .counters_count = in_kernel ? counter_count : 0};
          ASSERT_TRUE(w4a16_gemm_applies(p));
          const Status st = launch_w4a16_gemm(p, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const std::vector<float> got = dy.download();
          expect_matches_reference(got, x, w, dense, with_bias ? bias : std::vector<float>{}, m,
                                   type, what + " " + way);
          // The same bits on a second run: the splits are added in a fixed order (and the
          // counters were left at zero). The emulation runs CTAs in order: nothing to see there.
          if (!gpu_test::kEmulated) {
            dy.poison();
            ASSERT_TRUE(launch_w4a16_gemm(p, nullptr).ok());
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            const std::vector<float> again = dy.download();
            ASSERT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float)));
          }
          if (split && !in_kernel) reduced_by_kernel = got;
          if (in_kernel) {
            ASSERT_EQ(0,
                      std::memcmp(got.data(), reduced_by_kernel.data(), got.size() * sizeof(float)))
                << what << ": the in-kernel reduction differs from the reduction kernel";
            EXPECT_EQ(counters.download(),
                      std::vector<int>(static_cast<std::size_t>(counter_count), 0));
          }
        }
      }
    }
  }
}

// The layer the executor calls: both sides of the kernel / dequantize + cuBLASLt dispatch, with an
// act-order permutation (y = x[:, perm] W_stored^T) and without.
TEST(GpuW4A16Gemm, LinearLayerDispatchAndActOrder) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  std::mt19937_64 rng(41);
  std::mt19937 rng32(43);
  const Shape s{200, 1024, 128};
  for (bool act_order : {false, true}) {
    quant::QuantizedMatrix q = quant::testing::random_q4_z(rng, s.n, s.k, s.group_size, true);
    if (act_order) {
      q.input_permutation.resize(static_cast<std::size_t>(s.k));
      for (std::int64_t j = 0; j < s.k; ++j) {
        q.input_permutation[static_cast<std::size_t>(j)] =
            static_cast<std::int32_t>((j * 389 + 7) % s.k);
      }
    }
    StatusOr<quant::W4A16Matrix> w = quant::repack_w4a16(q);
    ASSERT_TRUE(w.ok());
    StatusOr<W4A16Linear> layer = W4A16Linear::upload(*w);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    const std::vector<float> dense = dense_weights(*w);
    for (std::int64_t m : {std::int64_t{3}, kW4A16KernelMaxRows, kW4A16KernelMaxRows + 37}) {
      const std::string what =
          std::string(act_order ? "act-order" : "plain") + " m=" + std::to_string(m);
      SCOPED_TRACE(what);
      const ScalarType type = ScalarType::kBF16;
      const std::vector<float> x = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(m * s.k), rng32), type);
      // The reference multiplies the gathered x by the stored weights.
      std::vector<float> gathered = x;
      if (act_order) {
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < s.k; ++j) {
            gathered[static_cast<std::size_t>(i * s.k + j)] = x[static_cast<std::size_t>(
                i * s.k + q.input_permutation[static_cast<std::size_t>(j)])];
          }
        }
      }
      DeviceArray dx(x, type), dy(static_cast<std::size_t>(m * s.n), type);
      dy.poison();
      const std::size_t scratch_bytes = layer->scratch_bytes(m, type);
      DeviceVector<std::uint8_t> scratch(std::max<std::size_t>(scratch_bytes, 1));
      const Status st = layer->forward(dx.data(), m, nullptr, dy.data(), type, **blas,
                                       scratch.data(), scratch_bytes, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // Past the kernel's rows the weights are rounded to the dtype before cuBLASLt
      // (launch_w4a16_dequantize), so the reference takes the rounded weights there.
      const std::vector<float> got = dy.download();
      if (m <= kW4A16KernelMaxRows) {
        expect_matches_reference(got, gathered, *w, dense, {}, m, type, what);
      } else {
        const std::vector<float> rounded = gpu_test::round_to(dense, type);
        expect_matches_reference(got, gathered, *w, rounded, {}, m, type, what);
      }
    }
  }
}

// The large-m path's weights: d (q - z) rounded once to the dtype, bit for bit what the host
// rounds, for every element (padding excluded).
// Every element of launch_w4a16_dequantize's output is the exact weight rounded once (padding
// rows poisoned, so a row read past the matrix shows).
void expect_dequantize_exact(const quant::W4A16Matrix& matrix, const std::string& what) {
  const quant::W4A16Matrix w = w4a16_testing::with_poisoned_padding(matrix);
  const DeviceW4A16 dw(w);
  const std::vector<float> exact = dense_weights(w);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    SCOPED_TRACE(what + " " + gpu_test::name_of(type) + " " + std::to_string(w.rows) + "x" +
                 std::to_string(w.cols) + " group " + std::to_string(w.group_size));
    DeviceArray out(exact.size(), type);
    out.poison();
    ASSERT_TRUE(launch_w4a16_dequantize(dw.view, out.data(), type, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = out.download();
    const std::vector<float> want = gpu_test::round_to(exact, type);
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << "element " << i << " (row " << i / w.cols << ", col "
                                 << i % w.cols << ")";
    }
  }
}

TEST(GpuW4A16Gemm, DequantizeIsExactThenRoundedOnce) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(3);
  for (const Shape& s :
       {Shape{100, 4128, 32}, Shape{37, 640, 640}, Shape{20, 1344, 96}, Shape{3, 4128, 128}}) {
    expect_dequantize_exact(random_matrix(rng, s), "Q4_Z");
  }
}

// The GGUF form: (S sc) (q - code_zero) + B mc rounded as the CPU dequantizer, then once to the
// dtype: 4-bit codes with mins (Q4_1, Q4_K, Q2_K), wider codes in packed_hi (Q5_0, Q5_1, Q8_0,
// Q5_K, Q6_K, Q3_K), groups of 16 (Q6_K).
TEST(GpuW4A16Gemm, GgufFormDequantizeIsExactThenRoundedOnce) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(12);
  for (const auto& [dtype, n, k] :
       std::vector<std::tuple<DType, std::int64_t, std::int64_t>>{{DType::kQ4_1, 20, 1056},
                                                                  {DType::kQ4_K, 37, 512},
                                                                  {DType::kQ5_0, 17, 544},
                                                                  {DType::kQ5_1, 16, 96},
                                                                  {DType::kQ8_0, 9, 800},
                                                                  {DType::kQ5_K, 24, 512},
                                                                  {DType::kQ6_K, 9, 768},
                                                                  {DType::kQ2_K, 40, 256},
                                                                  {DType::kQ3_K, 33, 512}}) {
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, dtype, n, k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(dtype, bytes.data(), n, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    expect_dequantize_exact(*w, std::string(dtype_name(dtype)));
  }
}

// Token tables kept quantized: GGUF Q4_K, Q6_K, Q8_0 and Q4_1 of `rows` x 512, and a Q4_Z one
// (37 x 640, groups of 128); their padding rows poisoned when asked.
std::vector<std::pair<std::string, quant::W4A16Matrix>> token_tables(std::mt19937_64& rng,
                                                                     std::int64_t rows,
                                                                     bool poison_padding) {
  const auto maybe_poisoned = [&](quant::W4A16Matrix w) {
    return poison_padding ? w4a16_testing::with_poisoned_padding(std::move(w)) : w;
  };
  std::vector<std::pair<std::string, quant::W4A16Matrix>> tables;
  for (DType dtype : {DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_1}) {
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, dtype, rows, 512);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(dtype, bytes.data(), rows, 512);
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    if (w.ok()) tables.emplace_back(std::string(dtype_name(dtype)), maybe_poisoned(std::move(*w)));
  }
  tables.emplace_back("Q4_Z", maybe_poisoned(random_matrix(rng, Shape{37, 640, 128})));
  return tables;
}

// A token table kept quantized: rows gathered by id are the dequantizer's rows bit for bit (times
// a scale in fp32, rounded once), ids out of range give zero rows (id == rows among them, which
// would read a poisoned padding row).
TEST(GpuW4A16Gemm, GatherRowsAreTheDequantizersRows) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(14);
  const auto tables = token_tables(rng, 40, true);
  for (const auto& [name, w] : tables) {
    const DeviceW4A16 dw(w);
    const std::vector<float> exact = dense_weights(w);
    const std::vector<std::int32_t> ids = {
        5, 0, static_cast<std::int32_t>(w.rows - 1), -1, static_cast<std::int32_t>(w.rows), 33, 5};
    const DeviceVector<std::int32_t> dids(ids);
    const auto n_ids = static_cast<std::int64_t>(ids.size());
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (const float scale : {1.0f, 25.25f}) {
        SCOPED_TRACE(name + " " + gpu_test::name_of(type) + " scale " + std::to_string(scale));
        DeviceArray out(static_cast<std::size_t>(n_ids * w.cols), type);
        out.poison();
        ASSERT_TRUE(
            launch_w4a16_gather_rows(dw.view, dids.data(), n_ids, scale, out.data(), type, nullptr)
                .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got = out.download();
        const std::vector<float> want =
            w4a16_testing::gathered_rows(exact, w.rows, w.cols, ids, scale, type);
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

// GGUF blocks in the GGUF form (quant/gguf_repack.h), every type, against float64: 4-bit codes
// with mins (Q4_1, Q4_K), 8-bit codes (two nibble tiles) with and without mins, group 16 (Q6_K),
// K not a multiple of the 64-column tile for the 32-block types, every m-tile count, bias, and K
// split or not.
TEST(GpuW4A16Gemm, GgufFormMatchesFloat64Reference) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(20261128);
  std::mt19937 rng32(6);
  struct GgufShape {
    DType dtype;
    std::int64_t n, k;
  };
  std::vector<std::pair<std::string, quant::W4A16Matrix>> matrices;
  for (const GgufShape& s : gpu_test::pick<GgufShape>({{DType::kQ4_1, 100, 4128},
                                                       {DType::kQ4_K, 37, 2304},
                                                       {DType::kQ5_0, 48, 2080},
                                                       {DType::kQ5_1, 16, 96},
                                                       {DType::kQ8_0, 100, 4128},
                                                       {DType::kQ5_K, 40, 768},
                                                       {DType::kQ6_K, 100, 2304},
                                                       {DType::kQ6_K, 9, 256},
                                                       {DType::kQ2_K, 40, 512},
                                                       {DType::kQ3_K, 33, 768}},
                                                      {{DType::kQ4_1, 20, 1056},
                                                       {DType::kQ4_K, 37, 768},
                                                       {DType::kQ5_0, 17, 544},
                                                       {DType::kQ8_0, 16, 800},
                                                       {DType::kQ5_K, 24, 512},
                                                       {DType::kQ6_K, 9, 768},
                                                       {DType::kQ2_K, 40, 256},
                                                       {DType::kQ3_K, 33, 512}})) {
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, s.dtype, s.n, s.k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(s.dtype, bytes.data(), s.n, s.k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    matrices.emplace_back(std::string(dtype_name(s.dtype)), std::move(*w));
  }
  {
    // Parts of different types in the general form (a Q4_K_M QKV, plus a Q8_0 part).
    const std::int64_t k = gpu_test::kEmulated ? 512 : 768;
    const std::int64_t q4_rows = gpu_test::kEmulated ? 20 : 40;
    const std::int64_t q6_rows = gpu_test::kEmulated ? 12 : 24;
    const auto a = cpu::testing::random_weights(rng, DType::kQ4_K, q4_rows, k);
    const auto b = cpu::testing::random_weights(rng, DType::kQ6_K, q6_rows, k);
    const auto c = cpu::testing::random_weights(rng, DType::kQ8_0, 9, k);
    const quant::GgufPart parts[] = {
        {DType::kQ4_K, a.data(), q4_rows, a.size() / static_cast<std::size_t>(q4_rows)},
        {DType::kQ6_K, b.data(), q6_rows, b.size() / static_cast<std::size_t>(q6_rows)},
        {DType::kQ8_0, c.data(), 9, c.size() / 9}};
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf_parts(parts, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    matrices.emplace_back("Q4_K+Q6_K+Q8_0", std::move(*w));
  }
  for (const auto& [name, matrix] : matrices) {
    const quant::W4A16Matrix* w = &matrix;
    const GgufShape s{DType::kF32, w->rows, w->cols};
    const std::vector<float> dense = dense_weights(*w);
    const std::vector<float> mins = min_terms(*w);
    const DeviceW4A16 dw(*w);
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (std::int64_t m : gpu_test::pick<std::int64_t>({1, 7, 16, 33, 64, 257}, {1, 16, 33})) {
        const std::string what = std::string(gpu_test::name_of(type)) + " " + name +
                                 " m=" + std::to_string(m) + " " + std::to_string(s.n) + "x" +
                                 std::to_string(s.k);
        SCOPED_TRACE(what);
        const std::vector<float> x = gpu_test::round_to(
            gpu_test::random_vector(static_cast<std::size_t>(m * s.k), rng32), type);
        const std::vector<float> bias =
            gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(s.n), rng32), type);
        const bool with_bias = m % 2 == 1;
        DeviceArray dx(x, type), db(bias, type);
        const std::size_t ws_bytes = w4a16_gemm_workspace_bytes(m, s.n, s.k);
        DeviceVector<float> workspace(std::max<std::size_t>(ws_bytes / sizeof(float), 1));
        for (bool split : {false, true}) {
          DeviceArray dy(static_cast<std::size_t>(m * s.n), type);
          dy.poison();
          const W4A16GemmParams p{.x = dx.data(),
                                  .w = dw.view,
                                  .bias = with_bias ? db.data() : nullptr,
                                  .y = dy.data(),
                                  .m = m,
                                  .dtype = type,
                                  .workspace = split ? workspace.data() : nullptr,
                                  .workspace_bytes = split ? ws_bytes : 0};
          ASSERT_TRUE(w4a16_gemm_applies(p));
          const Status st = launch_w4a16_gemm(p, nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_matches_reference(dy.download(), x, *w, dense,
                                   with_bias ? bias : std::vector<float>{}, m, type,
                                   what + (split ? " split" : " unsplit"), mins);
        }
      }
    }
  }
}

// The GGUF form's large-m path: the dequantized weights are the CPU's values rounded once, and
// the layer past kW4A16KernelMaxRows multiplies them (cuBLASLt).
TEST(GpuW4A16Gemm, GgufFormDequantizeAndLayerDispatch) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  std::mt19937_64 rng(12);
  std::mt19937 rng32(13);
  for (DType dtype :
       {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_0, DType::kQ4_1, DType::kQ3_K}) {
    const std::int64_t n = 72, k = 512;
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, dtype, n, k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(dtype, bytes.data(), n, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    expect_dequantize_exact(*w, std::string(dtype_name(dtype)));
    const std::vector<float> exact = dense_weights(*w);
    StatusOr<W4A16Linear> layer = W4A16Linear::upload(*w);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    EXPECT_EQ(layer->wide_codes(), quant::gguf_repack_hi_bits(dtype) > 0);
    EXPECT_EQ(layer->device_bytes(), w->device_bytes());
    for (std::int64_t m : {std::int64_t{3}, kW4A16KernelMaxRows + 37}) {
      const std::string what = std::string(dtype_name(dtype)) + " m=" + std::to_string(m);
      SCOPED_TRACE(what);
      const ScalarType type = ScalarType::kBF16;
      const std::vector<float> x =
          gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(m * k), rng32), type);
      DeviceArray dx(x, type), dy(static_cast<std::size_t>(m * n), type);
      dy.poison();
      const std::size_t scratch_bytes = layer->scratch_bytes(m, type);
      DeviceVector<std::uint8_t> scratch(std::max<std::size_t>(scratch_bytes, 1));
      const Status st = layer->forward(dx.data(), m, nullptr, dy.data(), type, **blas,
                                       scratch.data(), scratch_bytes, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = dy.download();
      expect_matches_reference(got, x, *w,
                               m <= kW4A16KernelMaxRows ? exact : gpu_test::round_to(exact, type),
                               {}, m, type, what, min_terms(*w));
    }
  }
}

// A token table kept quantized (the LM head of a GGUF model; its gathered rows are
// GatherRowsAreTheDequantizersRows'): the layer writes fp32 outputs (the logits) without the final
// rounding, by the kernel (m <= kW4A16KernelMaxRows) and by dequantize + cuBLASLt.
TEST(GpuW4A16Gemm, TableLayerWritesFp32Outputs) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  std::mt19937_64 rng(14);
  std::mt19937 rng32(15);
  const auto tables = token_tables(rng, 72, false);
  for (const auto& [name, w] : tables) {
    SCOPED_TRACE(name);
    const std::vector<float> exact = dense_weights(w);
    StatusOr<W4A16Linear> layer = W4A16Linear::upload(w);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    const ScalarType type = ScalarType::kBF16;
    const std::vector<float> bias =
        gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(w.rows), rng32), type);
    for (std::int64_t m :
         {std::int64_t{1}, std::int64_t{5}, kW4A16KernelMaxRows, kW4A16KernelMaxRows + 9}) {
      const std::string what = name + " fp32 y, m=" + std::to_string(m);
      SCOPED_TRACE(what);
      const std::vector<float> x = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(m * w.cols), rng32), type);
      DeviceArray dx(x, type), dbias(bias, type),
          dy(static_cast<std::size_t>(m * w.rows), ScalarType::kF32);
      dy.poison();
      const std::size_t scratch_bytes = layer->scratch_bytes(m, type);
      DeviceVector<std::uint8_t> scratch(std::max<std::size_t>(scratch_bytes, 1));
      // cuBLASLt adds a bias only in the input type (an LM head has none).
      const bool with_bias = m <= kW4A16KernelMaxRows;
      const Status st =
          layer->forward(dx.data(), m, with_bias ? dbias.data() : nullptr, dy.data(), type, **blas,
                         scratch.data(), scratch_bytes, nullptr, /*y_fp32=*/true);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // No output rounding: the bound's output term is fp32's; past the kernel's rows cuBLASLt
      // multiplies the weights rounded to bf16.
      expect_matches_reference(
          dy.download(), x, w, m <= kW4A16KernelMaxRows ? exact : gpu_test::round_to(exact, type),
          with_bias ? bias : std::vector<float>{}, m, ScalarType::kF32, what, min_terms(w));
    }
  }
}

// Widths past one 256-thread block and not a multiple of it, and more rows than a grid's y
// dimension holds (the kernel loops over them).
TEST(GpuW4A16Gemm, GatherColumnsFollowsThePermutation) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  // 65540 rows: past a grid's y dimension (minutes on the emulation, so not there).
  for (const auto& [m, k] : gpu_test::pick<std::pair<std::int64_t, std::int64_t>>(
           {{5, 96}, {3, 300}, {65540, 40}}, {{5, 96}, {3, 300}, {2, 1000}})) {
    const std::vector<std::int32_t> perm = column_permutation(k);
    const std::vector<float> x = gpu_test::round_to(
        gpu_test::random_vector(static_cast<std::size_t>(m * k), rng), ScalarType::kBF16);
    DeviceArray dx(x, ScalarType::kBF16), out(x.size(), ScalarType::kBF16);
    DeviceVector<std::int32_t> dperm(perm);
    out.poison();
    ASSERT_TRUE(
        launch_gather_columns(dx.data(), m, k, dperm.data(), out.data(), ScalarType::kBF16, nullptr)
            .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = out.download();
    const std::vector<float> want = gathered_columns(x, m, k, perm);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < k; ++j) {
        ASSERT_EQ(got[static_cast<std::size_t>(i * k + j)],
                  want[static_cast<std::size_t>(i * k + j)])
            << "m " << m << " k " << k << " at " << i << ", " << j;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
