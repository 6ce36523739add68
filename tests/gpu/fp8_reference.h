// The FP8 kernels' host oracles for tests/gpu/fp8_gemm_test.cc (on a GPU, and on the CPU
// emulation as emulated_fp8_test): the per-row activation quantizer's rule
// (fp8_row_scale.cuh) on the host, and the skinny GEMM's exactly summable codes, exact sums and
// epilogue, which make its outputs predictable bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "kernels/gemm/fp8_skinny_gemm.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::kernels::fp8_testing {

struct HostFp8Rows {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

// fp8_row_scale.cuh's rule on the host: the same fp32 operations, so the same bits.
inline HostFp8Rows quantize_on_host(const std::vector<float>& x, std::int64_t rows,
                                    std::int64_t cols) {
  HostFp8Rows out{std::vector<std::uint8_t>(x.size()),
                  std::vector<float>(static_cast<std::size_t>(rows))};
  for (std::int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (std::int64_t c = 0; c < cols; ++c) {
      amax = std::max(amax, std::abs(x[static_cast<std::size_t>(r * cols + c)]));
    }
    const float inverse = amax > 0.0f ? quant::kFp8E4M3Max / amax : 0.0f;
    out.scales[static_cast<std::size_t>(r)] = amax > 0.0f ? amax / quant::kFp8E4M3Max : 1.0f;
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      out.codes[i] = quant::float_to_fp8_e4m3(x[i] * inverse);
    }
  }
  return out;
}

// Codes whose products, and every partial sum of up to 4100 of them, are exact in fp32 in any
// order: the integers -15..15, or the subnormals +-j 2^-9 (j = 0..7). The kernel's fp32 sums are
// then the exact sums and its outputs the host's epilogue bit for bit, so a wrong column, tail,
// row, channel or scale shows as a mismatch, not as a rounding. Subnormal codes exercise the f16
// subnormals they become in the kernel.
enum class CodeSet { kIntegers, kSubnormals };

inline const char* name_of(CodeSet set) {
  return set == CodeSet::kIntegers ? "integers" : "subnormals";
}

inline std::vector<std::uint8_t> exact_codes(std::size_t n, CodeSet set, std::mt19937& rng) {
  std::vector<std::uint8_t> codes(n);
  for (std::uint8_t& c : codes) {
    if (set == CodeSet::kIntegers) {
      c = quant::float_to_fp8_e4m3(static_cast<float>(static_cast<int>(rng() % 31) - 15));
    } else {
      c = static_cast<std::uint8_t>((rng() & 0x80u) | (rng() & 0x07u));  // exponent field 0
    }
  }
  return codes;
}

// Random finite E4M3 codes (no NaN codes): sums that round, for comparing the kernel's loops.
inline std::vector<std::uint8_t> finite_codes(std::size_t n, std::mt19937& rng) {
  std::vector<std::uint8_t> codes(n);
  for (std::uint8_t& c : codes) {
    do {
      c = static_cast<std::uint8_t>(rng());
    } while ((c & 0x7F) == 0x7F);
  }
  return codes;
}

// [rows, n] sums of x [rows, k] times w [n, k] codes in float64, rounded to fp32: exact for
// exact_codes (fewer than 2^24 units of the smallest product).
inline std::vector<float> exact_sums(const std::vector<std::uint8_t>& x,
                                     const std::vector<std::uint8_t>& w, std::int64_t rows,
                                     std::int64_t n, std::int64_t k) {
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<double> xv(x.size()), wv(w.size());
  for (std::size_t i = 0; i < x.size(); ++i) xv[i] = fp8_e4m3_to_float(x[i]);
  for (std::size_t i = 0; i < w.size(); ++i) wv[i] = fp8_e4m3_to_float(w[i]);
  std::vector<float> sums(at(rows * n));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < k; ++c) sum += xv[at(i * k + c)] * wv[at(j * k + c)];
      sums[at(i * n + j)] = static_cast<float>(sum);
    }
  }
  return sums;
}

// The kernel's epilogue on the host: ((sum * x_scale) * w_scale) + bias, each step rounded to
// fp32 once (a product of two floats is exact in double).
inline float host_epilogue(float sum, float x_scale, float w_scale, const float* bias) {
  const auto mul = [](float a, float b) { return static_cast<float>(static_cast<double>(a) * b); };
  const float out = mul(mul(sum, x_scale), w_scale);
  return bias != nullptr ? out + *bias : out;
}

// The skinny GEMM's [m, n] output from exact_sums' [>= m, n] sums, rounded to `type`; `bias`
// [n] (already rounded to `type`) or empty.
inline std::vector<float> skinny_output(const std::vector<float>& sums,
                                        const std::vector<float>& x_scales,
                                        const std::vector<float>& w_scales,
                                        const std::vector<float>& bias, std::int64_t m,
                                        std::int64_t n, cuda::ScalarType type) {
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  std::vector<float> want(at(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      want[at(i * n + j)] = host_epilogue(sums[at(i * n + j)], x_scales[at(i)], w_scales[at(j)],
                                          bias.empty() ? nullptr : &bias[at(j)]);
    }
  }
  return gpu_test::round_to(want, type);
}

// One and two mma tiles of x, each full and partial.
inline constexpr std::int64_t kSkinnyRows[] = {1, 2, 3, 7, 8, 9, kFp8SkinnyGemmMaxRows};

// Codes below 2 in magnitude but for pairs of 448s whose products cancel (+448 * 448 at column a,
// -448 * 448 at column b, in every row): while a warp's accumulator holds 448^2 the small terms
// lose all but ~2^-6 of their value, so the sums' bits depend on which columns each warp adds in
// which order, far above the output's rounding (random codes alone differ only in fp32's last
// bits, which bf16 rounds away).
inline void add_cancelling_pairs(std::vector<std::uint8_t>& x, std::vector<std::uint8_t>& w,
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

}  // namespace pagoda::kernels::fp8_testing
