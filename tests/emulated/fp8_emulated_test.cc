// The FP8 kernels run on the CPU by the CUDA emulation (kernels/emulation/cuda_emulation.h)
// against the host oracles the GPU test uses (tests/gpu/fp8_reference.h): the activation
// quantizer and RMSNorm's fused FP8 output bit for bit against the host rule, and the skinny GEMM
// (kernels/gemm/fp8_skinny_gemm.cu), both loops, 16-byte and byte loads, bit for bit on exactly
// summable codes and the loops against each other on random codes. The shapes are the GPU test's
// scaled down (the emulation runs every thread as a fiber) but keep what each one is for: k with
// a tail, k within one load, spans split between the pipelined loop's two stages, warps with no
// span, partial CTAs of channels, one and two x tiles, full and partial.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "kernels/gemm/fp8_skinny_gemm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_quantize.h"
#include "tests/emulated/host_memory.h"
#include "tests/gpu/fp8_reference.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using fp8_testing::CodeSet;
using fp8_testing::exact_codes;
using fp8_testing::exact_sums;
using fp8_testing::finite_codes;
using fp8_testing::HostFp8Rows;
using fp8_testing::kSkinnyRows;
using fp8_testing::quantize_on_host;
using fp8_testing::skinny_output;

using Array = emulated_test::HostArray;

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

const char* name_of(Fp8SkinnyVariant variant) {
  return variant == Fp8SkinnyVariant::kPipelined ? "pipelined" : "whole-span";
}

constexpr Fp8SkinnyVariant kVariants[] = {Fp8SkinnyVariant::kWholeSpan,
                                          Fp8SkinnyVariant::kPipelined};

TEST(EmulatedFp8, QuantizeRowsIsTheHostRuleBitForBit) {
  std::mt19937 rng(17);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {7, 100}, {9, 4096}, {3, 4099}}) {
      SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols));
      std::vector<float> x =
          gpu_test::random_vector(static_cast<std::size_t>(rows * cols), rng, -30.0f, 30.0f);
      if (rows > 1) std::fill(x.begin(), x.begin() + cols, 0.0f);  // a zero row
      x = gpu_test::round_to(x, type);
      Array dx(x, type);
      std::vector<std::uint8_t> codes(x.size(), 0xFF);
      std::vector<float> scales(static_cast<std::size_t>(rows), -1.0f);
      const Status st = launch_fp8_quantize_rows({.x = dx.data(),
                                                  .codes = codes.data(),
                                                  .scales = scales.data(),
                                                  .rows = rows,
                                                  .cols = cols,
                                                  .dtype = type},
                                                 nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const HostFp8Rows want = quantize_on_host(x, rows, cols);
      EXPECT_EQ(scales, want.scales);
      EXPECT_EQ(codes, want.codes);
    }
  }
}

// RMSNorm's fused FP8 output is the host rule applied to its own 16-bit output, bit for bit, on
// the vector path (hidden % 8 == 0) and the scalar one, with and without a residual; and the
// quantizer on that output agrees.
TEST(EmulatedFp8, RmsNormFusedOutputIsTheHostRuleOnItsOutput) {
  std::mt19937 rng(23);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (std::int64_t hidden : {4096, 1001}) {
      for (bool with_residual : {false, true}) {
        SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " hidden " + std::to_string(hidden) +
                     (with_residual ? " residual" : ""));
        const std::int64_t tokens = 5;
        const auto n = static_cast<std::size_t>(tokens * hidden);
        Array x(gpu_test::round_to(gpu_test::random_vector(n, rng), type), type);
        Array residual(gpu_test::round_to(gpu_test::random_vector(n, rng), type), type);
        Array weight(gpu_test::round_to(
                         gpu_test::random_vector(static_cast<std::size_t>(hidden), rng), type),
                     type);
        Array out(n, type);
        std::vector<std::uint8_t> fused_codes(n, 0xFF), codes(n, 0xFF);
        std::vector<float> fused_scales(tokens, -1.0f), scales(tokens, -1.0f);
        Status st = launch_rms_norm({.x = x.data(),
                                     .residual = with_residual ? residual.data() : nullptr,
                                     .weight = weight.data(),
                                     .out = out.data(),
                                     .num_tokens = tokens,
                                     .hidden = hidden,
                                     .eps = 1e-6f,
                                     .dtype = type,
                                     .out_fp8 = fused_codes.data(),
                                     .out_fp8_scales = fused_scales.data()},
                                    nullptr);
        ASSERT_TRUE(st.ok()) << st.to_string();
        st = launch_fp8_quantize_rows({.x = out.data(),
                                       .codes = codes.data(),
                                       .scales = scales.data(),
                                       .rows = tokens,
                                       .cols = hidden,
                                       .dtype = type},
                                      nullptr);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const HostFp8Rows want = quantize_on_host(out.values(), tokens, hidden);
        EXPECT_EQ(fused_scales, want.scales);
        EXPECT_EQ(fused_codes, want.codes);
        EXPECT_EQ(scales, want.scales);
        EXPECT_EQ(codes, want.codes);
      }
    }
  }
}

// launch_fp8_skinny_gemm on [16, k] x codes from `x_set` and [n, k] weight codes from `w_set`, at
// every m of kSkinnyRows (bias at odd m), bf16 and f16 out, through both loops, against the
// host's exact sums. `misalign` bytes before x and w take the byte loads even at k % 16 == 0.
void expect_skinny_exact(std::int64_t n, std::int64_t k, CodeSet x_set, CodeSet w_set,
                         std::mt19937& rng, std::size_t misalign = 0) {
  constexpr std::int64_t kRows = kFp8SkinnyGemmMaxRows;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  const std::vector<std::uint8_t> x = exact_codes(at(kRows * k), x_set, rng);
  const std::vector<std::uint8_t> w = exact_codes(at(n * k), w_set, rng);
  const std::vector<float> x_scales =
      gpu_test::random_vector(at(kRows), rng, 1.0f / 512, 1.0f / 128);
  const std::vector<float> w_scales = gpu_test::random_vector(at(n), rng, 1.0f / 4096, 1.0f / 256);
  const std::vector<float> bias_values = gpu_test::random_vector(at(n), rng);
  const std::vector<float> sums = exact_sums(x, w, kRows, n, k);
  std::vector<std::uint8_t> x_padded(misalign, 0), w_padded(misalign, 0);
  x_padded.insert(x_padded.end(), x.begin(), x.end());
  w_padded.insert(w_padded.end(), w.begin(), w.end());
  const std::uint8_t* dx = x_padded.data() + misalign;
  const std::uint8_t* dw = w_padded.data() + misalign;
  // What decides the loads: 16-byte ones exactly where the GPU would take them.
  ASSERT_EQ(aligned16(dx) && aligned16(dw), misalign == 0);
  for (const Fp8SkinnyVariant variant : kVariants) {
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      const std::vector<float> bias = gpu_test::round_to(bias_values, type);
      Array db(bias, type);
      for (const std::int64_t m : kSkinnyRows) {
        const bool with_bias = m % 2 == 1;
        SCOPED_TRACE(std::string(name_of(variant)) + " " + gpu_test::name_of(type) +
                     " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                     " k=" + std::to_string(k) + " x " + name_of(x_set) + " w " + name_of(w_set) +
                     (with_bias ? " bias" : "") + " misalign " + std::to_string(misalign));
        Array dy(at(m * n), type);
        const Status s = launch_fp8_skinny_gemm({.x = dx,
                                                 .x_scales = x_scales.data(),
                                                 .w = dw,
                                                 .w_scales = w_scales.data(),
                                                 .bias = with_bias ? db.data() : nullptr,
                                                 .y = dy.data(),
                                                 .m = m,
                                                 .n = n,
                                                 .k = k,
                                                 .dtype = type,
                                                 .variant = variant},
                                                nullptr);
        ASSERT_TRUE(s.ok()) << s.to_string();
        const std::vector<float> want = skinny_output(
            sums, x_scales, w_scales, with_bias ? bias : std::vector<float>{}, m, n, type);
        const std::vector<float> got = dy.values();
        int failures = 0;
        for (std::size_t e = 0; e < want.size() && failures < 5; ++e) {
          if (!(got[e] == want[e])) {
            ADD_FAILURE() << "y[" << e / at(n) << ", " << e % at(n) << "] = " << got[e] << ", want "
                          << want[e];
            ++failures;
          }
        }
      }
    }
  }
}

// Every path of the kernel at small sizes: k within one load (16), not a multiple of 16 (40:
// byte loads, a tail), a multiple of 16 but not of a warp's 512-column span (1040: warps 0 and 1
// a whole span, warp 2 a part of one, warp 3 none); channels within one CTA's 16 (1, 7) and past
// whole CTAs (129); subnormal codes on either side; x and w misaligned at k % 16 == 0.
TEST(EmulatedFp8, SkinnyGemmIsExactOnExactlySummableCodes) {
  std::mt19937 rng(41);
  for (const std::int64_t n : {1, 7, 129}) {
    for (const std::int64_t k : {16, 40, 1040}) {
      expect_skinny_exact(n, k, CodeSet::kIntegers, CodeSet::kIntegers, rng);
    }
  }
  for (const auto& [x_set, w_set] :
       std::vector<std::pair<CodeSet, CodeSet>>{{CodeSet::kSubnormals, CodeSet::kIntegers},
                                                {CodeSet::kIntegers, CodeSet::kSubnormals},
                                                {CodeSet::kSubnormals, CodeSet::kSubnormals}}) {
    expect_skinny_exact(17, 1040, x_set, w_set, rng);
  }
  expect_skinny_exact(33, 1040, CodeSet::kIntegers, CodeSet::kIntegers, rng, 3);
}

// The GPU test's model shapes scaled down: several spans per warp (k = 4096: two whole spans
// each; 4100: and a 4-code tail, byte loads), and the pipelined loop's stage boundaries — a tail
// inside a span's second 256-column stage (2352: warp 0's second span, vector; 2340: byte loads),
// a span ending exactly at a stage boundary (2304) — with a partial last CTA of channels (40,
// and 150 for Llama's 6150 rows).
TEST(EmulatedFp8, SkinnyGemmIsExactAtModelLikeShapes) {
  std::mt19937 rng(43);
  for (const std::int64_t k : {4096, 4100, 2352, 2340, 2304}) {
    expect_skinny_exact(40, k, CodeSet::kIntegers, CodeSet::kIntegers, rng);
  }
  expect_skinny_exact(150, 4100, CodeSet::kIntegers, CodeSet::kIntegers, rng);
}

// Codes below 2 in magnitude but for pairs of 448s whose products cancel (+448 * 448 at column a,
// -448 * 448 at column b, in every row): while a warp's accumulator holds 448^2 the small terms
// lose all but ~2^-6 of their value, so the sums' bits depend on which columns each warp adds in
// which order, far above the output's rounding (random codes alone differ only in fp32's last
// bits, which bf16 rounds away).
void add_cancelling_pairs(std::vector<std::uint8_t>& x, std::vector<std::uint8_t>& w,
                          std::int64_t n, std::int64_t k) {
  constexpr std::uint8_t k448 = 0x7E, kMinus448 = 0xFE;
  for (std::uint8_t& c : x) c &= 0xBF;  // exponent field below 8: |v| < 2
  for (std::uint8_t& c : w) c &= 0xBF;
  const std::int64_t pairs[][2] = {{0, k - 1}, {k / 3, 2 * k / 3}};
  for (const auto& [a, b] : pairs) {
    if (a == b) continue;
    for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(k); ++r) {
      x[r * static_cast<std::size_t>(k) + static_cast<std::size_t>(a)] = k448;
      x[r * static_cast<std::size_t>(k) + static_cast<std::size_t>(b)] = k448;
    }
    for (std::int64_t r = 0; r < n; ++r) {
      w[static_cast<std::size_t>(r * k + a)] = k448;
      w[static_cast<std::size_t>(r * k + b)] = kMinus448;
    }
  }
}

// The two loops give each warp the same columns in the same order, so on codes whose sums round
// they still agree bit for bit (the emulation's mma rounds each step once, as the tensor cores do
// not, but in the same order for both): at k with no whole span, an odd and an even number of
// spans per warp, tails in either stage, and byte loads; random codes, and random codes with
// cancelling pairs.
TEST(EmulatedFp8, SkinnyGemmLoopsAgreeBitForBitOnRandomCodes) {
  std::mt19937 rng(47);
  constexpr std::int64_t n = 20;
  for (const std::int64_t k : {16, 100, 1040, 2100, 2352, 4100, 6160, 14352}) {
    for (const bool cancelling : {false, true}) {
      const std::size_t rows = kFp8SkinnyGemmMaxRows;
      std::vector<std::uint8_t> x = finite_codes(rows * static_cast<std::size_t>(k), rng);
      std::vector<std::uint8_t> w = finite_codes(static_cast<std::size_t>(n * k), rng);
      if (cancelling) add_cancelling_pairs(x, w, n, k);
      const std::vector<float> x_scales =
          gpu_test::random_vector(rows, rng, 1.0f / 512, 1.0f / 128);
      const std::vector<float> w_scales =
          gpu_test::random_vector(static_cast<std::size_t>(n), rng, 1.0f / 4096, 1.0f / 256);
      for (const std::int64_t m : {1, 7, 16}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) +
                     (cancelling ? " cancelling" : ""));
        std::vector<std::vector<float>> outs;
        for (const Fp8SkinnyVariant variant : kVariants) {
          Array dy(static_cast<std::size_t>(m * n), ScalarType::kBF16);
          const Status st = launch_fp8_skinny_gemm({.x = x.data(),
                                                    .x_scales = x_scales.data(),
                                                    .w = w.data(),
                                                    .w_scales = w_scales.data(),
                                                    .y = dy.data(),
                                                    .m = m,
                                                    .n = n,
                                                    .k = k,
                                                    .dtype = ScalarType::kBF16,
                                                    .variant = variant},
                                                   nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          outs.push_back(dy.values());
        }
        for (std::size_t e = 0; e < outs[0].size(); ++e) {
          ASSERT_TRUE(std::isfinite(outs[0][e])) << "whole-span y[" << e << "]";
          ASSERT_EQ(outs[1][e], outs[0][e]) << "y[" << e / n << ", " << e % n << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
