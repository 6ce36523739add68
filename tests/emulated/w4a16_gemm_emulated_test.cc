// The W4A16 GEMM kernel (kernels/gemm/w4a16_gemm.cu) run on the CPU by the CUDA emulation
// (kernels/emulation/cuda_emulation.h) against the float64 oracle the GPU test uses
// (tests/gpu/w4a16_reference.h): every weight form, m-tile count, K split (by the reduction kernel
// and in-kernel), partial tiles and groups at awkward sizes, so the kernel's index maps, ring and
// group bookkeeping are checked on machines with no GPU. The GPU test runs the same cases and more
// on hardware; this one is what CI can run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/w4a16_gemm.h"
#include "model/dequantize.h"
#include "quant/gguf_repack.h"
#include "quant/w4a16_layout.h"
#include "tests/emulated/host_memory.h"
#include "tests/gpu/w4a16_reference.h"
#include "tests/unit/backend/test_random.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using w4a16_testing::dense_weights;
using w4a16_testing::expect_matches_reference;
using w4a16_testing::min_terms;
using w4a16_testing::random_matrix;
using w4a16_testing::Shape;

using emulated_test::HostArray;
using emulated_test::HostBuffer;

struct HostW4A16 {
  explicit HostW4A16(const quant::W4A16Matrix& m)
      : packed(m.packed),
        scales(m.scales),
        zeros(m.zeros),
        packed_hi(m.packed_hi),
        scale_codes(m.scale_codes),
        mins(m.mins),
        min_codes(m.min_codes) {
    view = {.packed = packed.as<std::uint32_t>(),
            .scales = scales.as<std::uint16_t>(),
            .zeros = zeros.or_null<std::uint8_t>(),
            .rows = m.rows,
            .cols = m.cols,
            .group_size = m.group_size,
            .packed_hi = packed_hi.or_null<std::uint32_t>(),
            .scale_codes = scale_codes.or_null<std::int8_t>(),
            .mins = mins.or_null<std::uint16_t>(),
            .min_codes = min_codes.or_null<std::int8_t>(),
            .super_shift = m.super_shift,
            .code_zero = m.code_zero,
            .hi_bits = m.hi_bits};
  }
  HostBuffer packed, scales, zeros, packed_hi, scale_codes, mins, min_codes;
  W4A16Weights view;
};

enum class Way { kUnsplit, kSplit, kSplitInKernel };

// One product through launch_w4a16_gemm, checked against the oracle; returns y's bits.
std::vector<std::uint16_t> run_and_check(const HostW4A16& w, const quant::W4A16Matrix& matrix,
                                         const std::vector<float>& dense,
                                         const std::vector<float>& mins, std::int64_t m,
                                         ScalarType type, Way way, std::mt19937& rng,
                                         const std::string& what) {
  const std::vector<float> x = gpu_test::round_to(
      gpu_test::random_vector(static_cast<std::size_t>(m * matrix.cols), rng), type);
  const std::vector<float> bias =
      gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(matrix.rows), rng), type);
  const bool with_bias = m % 2 == 1;
  const HostArray dx(x, type), db(bias, type);
  const std::size_t ws_bytes = w4a16_gemm_workspace_bytes(m, matrix.rows, matrix.cols);
  const HostBuffer workspace(ws_bytes);
  const std::int64_t counter_count = w4a16_gemm_counter_count(m, matrix.rows);
  const HostBuffer counters(std::vector<int>(static_cast<std::size_t>(counter_count), 0));
  const HostBuffer dy(static_cast<std::size_t>(m * matrix.rows) * 2);  // poisoned: all written?
  const bool split = way != Way::kUnsplit;
  const W4A16GemmParams p{.x = dx.data(),
                          .w = w.view,
                          .bias = with_bias ? db.data() : nullptr,
                          .y = dy.as<void>(),
                          .m = m,
                          .dtype = type,
                          .workspace = split ? workspace.as<float>() : nullptr,
                          .workspace_bytes = split ? ws_bytes : 0,
                          .counters = way == Way::kSplitInKernel ? counters.as<int>() : nullptr,
                          .counters_count = way == Way::kSplitInKernel ? counter_count : 0};
  EXPECT_TRUE(w4a16_gemm_applies(p)) << what;
  const Status st = launch_w4a16_gemm(p, nullptr);
  EXPECT_TRUE(st.ok()) << what << ": " << st.to_string();
  expect_matches_reference(dy.to_floats(type), x, matrix, dense,
                           with_bias ? bias : std::vector<float>{}, m, type, what, mins);
  if (way == Way::kSplitInKernel) {
    for (std::int64_t i = 0; i < counter_count; ++i) {
      EXPECT_EQ(counters.as<int>()[i], 0) << what << ": counter " << i << " not left at zero";
    }
  }
  return dy.to_vector<std::uint16_t>();
}

TEST(EmulatedW4A16Gemm, ZeroPointFormMatchesFloat64Reference) {
  std::mt19937_64 rng(20261128);
  std::mt19937 rng32(25);
  // K not a multiple of the tile, groups of 32 / 96 / 64 / 128 (the last two of whole tiles, K
  // a multiple of them, or the repacker would keep 32-column groups) / per channel, n not a
  // multiple of 16.
  for (const Shape& s : {Shape{37, 1056, 32}, Shape{20, 1344, 96}, Shape{24, 1088, 64},
                         Shape{48, 2176, 128}, Shape{16, 640, 640}}) {
    const quant::W4A16Matrix w = random_matrix(rng, s);
    const std::vector<float> dense = dense_weights(w);
    const HostW4A16 hw(w);
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (std::int64_t m : {1, 7, 16, 33, 64}) {
        const std::string what = std::string(gpu_test::name_of(type)) + " m=" + std::to_string(m) +
                                 " " + std::to_string(s.n) + "x" + std::to_string(s.k) + " group " +
                                 std::to_string(s.group_size);
        std::mt19937 same = rng32;
        const auto reduced = run_and_check(hw, w, dense, {}, m, type, Way::kSplit, same, what);
        same = rng32;
        const auto in_kernel = run_and_check(hw, w, dense, {}, m, type, Way::kSplitInKernel, same,
                                             what + " in-kernel");
        EXPECT_EQ(reduced, in_kernel) << what << ": the in-kernel reduction differs";
        run_and_check(hw, w, dense, {}, m, type, Way::kUnsplit, rng32, what + " unsplit");
      }
    }
  }
}

TEST(EmulatedW4A16Gemm, GgufFormMatchesFloat64Reference) {
  std::mt19937_64 rng(20261129);
  std::mt19937 rng32(26);
  struct GgufShape {
    DType dtype;
    std::int64_t n, k;
  };
  std::vector<std::pair<std::string, quant::W4A16Matrix>> matrices;
  for (const GgufShape& s : {GgufShape{DType::kQ4_1, 20, 1056}, GgufShape{DType::kQ4_K, 37, 768},
                             GgufShape{DType::kQ5_0, 17, 544}, GgufShape{DType::kQ8_0, 16, 800},
                             GgufShape{DType::kQ5_K, 24, 512}, GgufShape{DType::kQ6_K, 9, 768}}) {
    const std::vector<std::uint8_t> bytes = cpu::testing::random_weights(rng, s.dtype, s.n, s.k);
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf(s.dtype, bytes.data(), s.n, s.k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    matrices.emplace_back(std::string(dtype_name(s.dtype)), std::move(*w));
  }
  {
    // A Q4_K_M QKV with a Q6_K V, plus a Q8_0 part: 16-column groups and 8-bit codes together.
    const std::int64_t k = 512;
    const auto a = cpu::testing::random_weights(rng, DType::kQ4_K, 20, k);
    const auto b = cpu::testing::random_weights(rng, DType::kQ6_K, 12, k);
    const auto c = cpu::testing::random_weights(rng, DType::kQ8_0, 9, k);
    const quant::GgufPart parts[] = {{DType::kQ4_K, a.data(), 20, a.size() / 20},
                                     {DType::kQ6_K, b.data(), 12, b.size() / 12},
                                     {DType::kQ8_0, c.data(), 9, c.size() / 9}};
    StatusOr<quant::W4A16Matrix> w = quant::repack_gguf_parts(parts, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    matrices.emplace_back("Q4_K+Q6_K+Q8_0", std::move(*w));
  }
  for (const auto& [name, w] : matrices) {
    const std::vector<float> dense = dense_weights(w);
    const std::vector<float> mins = min_terms(w);
    const HostW4A16 hw(w);
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (std::int64_t m : {1, 16, 33}) {
        const std::string what = std::string(gpu_test::name_of(type)) + " " + name +
                                 " m=" + std::to_string(m) + " " + std::to_string(w.rows) + "x" +
                                 std::to_string(w.cols);
        run_and_check(hw, w, dense, mins, m, type, Way::kSplit, rng32, what + " split");
        run_and_check(hw, w, dense, mins, m, type, Way::kUnsplit, rng32, what + " unsplit");
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
