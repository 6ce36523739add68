// The skinny decode GEMM against a float64 reference on the same 16-bit inputs, and against
// cuBLASLt (the path it replaces), at awkward sizes: every m it takes, n not a multiple of the
// columns a warp or block owns, k not a multiple of a warp's load span, bias and fp32 output.
//
// Tolerance: the kernel sums k products exactly representable in fp32 (16-bit x 16-bit) in fp32
// (error <= ~k * 2^-24 * sum |x w| in the worst order, far less in practice) and rounds once to
// the output type (half an ulp: u |y|). So |got - ref| <= u_out |ref| + 1e-5 sum|x w| holds with
// a wide margin, while a wrong element (a skipped pack, a wrong row) is off by O(|x w|) terms.
#include "kernels/gemm/skinny_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "backend/cuda/blas_lt.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;

struct Case {
  std::int64_t m, n, k;
  bool bias;
  bool output_f32;
};

void check_case(const Case& c, ScalarType type, std::mt19937& rng) {
  const std::vector<float> x =
      gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(c.m * c.k), rng), type);
  const std::vector<float> w =
      gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(c.n * c.k), rng), type);
  const std::vector<float> bias =
      gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(c.n), rng), type);
  const ScalarType out_type = c.output_f32 ? ScalarType::kF32 : type;
  gpu_test::DeviceArray dx(x, type), dw(w, type), db(bias, type);
  gpu_test::DeviceArray dy(static_cast<std::size_t>(c.m * c.n), out_type);
  dy.poison();
  const SkinnyGemmParams p{.x = dx.data(),
                           .w = dw.data(),
                           .bias = c.bias ? db.data() : nullptr,
                           .y = dy.data(),
                           .m = c.m,
                           .n = c.n,
                           .k = c.k,
                           .dtype = type,
                           .output_f32 = c.output_f32};
  ASSERT_TRUE(skinny_gemm_applies(p));
  const Status s = launch_skinny_gemm(p, nullptr);
  ASSERT_TRUE(s.ok()) << s.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = dy.download();

  // cuBLASLt on the same buffers, for comparison (its bias epilogue takes no fp32 output; the
  // executor never asks for that pair, so cuBLASLt's side of it is left out).
  auto blas = cuda::BlasLt::create(4u << 20);
  ASSERT_TRUE(blas.ok());
  gpu_test::DeviceArray dref(static_cast<std::size_t>(c.m * c.n), out_type);
  const bool cublas_runs = !(c.bias && c.output_f32);
  if (cublas_runs) {
    const Status blas_status = (*blas)->linear({.x = dx.data(),
                                                .w = dw.data(),
                                                .bias = c.bias ? db.data() : nullptr,
                                                .y = dref.data(),
                                                .m = c.m,
                                                .n = c.n,
                                                .k = c.k,
                                                .input_type = type,
                                                .output_type = out_type},
                                               nullptr);
    ASSERT_TRUE(blas_status.ok()) << blas_status.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  const std::vector<float> cublas = cublas_runs ? dref.download() : std::vector<float>();

  const double u = gpu_test::unit_roundoff(out_type);
  double worst = 0.0, worst_cublas = 0.0;
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < c.n; ++j) {
      double ref = c.bias ? bias[j] : 0.0, mass = 0.0;
      for (std::int64_t t = 0; t < c.k; ++t) {
        const double prod = static_cast<double>(x[i * c.k + t]) * w[j * c.k + t];
        ref += prod;
        mass += std::abs(prod);
      }
      const float g = got[i * c.n + j];
      const double bound = u * std::abs(ref) + 1e-5 * mass + 1e-30;
      ASSERT_TRUE(std::isfinite(g)) << "unwritten or NaN at (" << i << ", " << j << ")";
      ASSERT_LE(std::abs(g - ref), bound)
          << "m=" << c.m << " n=" << c.n << " k=" << c.k << " at (" << i << ", " << j << ")";
      worst = std::max(worst, std::abs(g - ref) / bound);
      if (cublas_runs) {
        worst_cublas = std::max(worst_cublas, std::abs(cublas[i * c.n + j] - ref) / bound);
      }
    }
  }
  // Both sit well inside the bound (checked above for ours); say how close to it each came.
  std::printf("m=%lld n=%lld k=%lld: worst error / bound %.3f (cuBLASLt %s)\n",
              static_cast<long long>(c.m), static_cast<long long>(c.n), static_cast<long long>(c.k),
              worst, cublas_runs ? std::to_string(worst_cublas).c_str() : "n/a");
}

TEST(GpuSkinnyGemm, MatchesFloat64ReferenceAtAwkwardSizes) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(20261122);
  const Case cases[] = {
      {1, 1, 8, false, false},     {1, 7, 264, true, false},     {2, 33, 520, false, false},
      {3, 65, 1000, true, true},   {4, 130, 2056, false, false}, {3, 17, 256, true, false},
      {2, 255, 4104, false, true}, {4, 9, 776, true, false},     {4, 513, 1032, true, true},
      {4, 4097, 64, false, false}, {1, 1031, 4096, true, true},
  };

  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " m=" + std::to_string(c.m) +
                   " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
      check_case(c, type, rng);
    }
  }
}

TEST(GpuSkinnyGemm, TakesOnlyWhatItCanRun) {
  SkinnyGemmParams p{.m = 1, .n = 16, .k = 64, .dtype = ScalarType::kBF16};
  alignas(16) static std::uint16_t buffer[64];
  p.x = p.w = buffer;
  EXPECT_TRUE(skinny_gemm_applies(p));
  p.m = kSkinnyGemmMaxRows + 1;
  EXPECT_FALSE(skinny_gemm_applies(p));
  p.m = 1;
  p.k = 60;  // not whole 16-byte loads
  EXPECT_FALSE(skinny_gemm_applies(p));
  p.k = 64;
  p.dtype = ScalarType::kF32;  // FP32 stays on cuBLASLt (no TF32) for the tests' tight bounds
  EXPECT_FALSE(skinny_gemm_applies(p));
  p.dtype = ScalarType::kBF16;
  p.x = reinterpret_cast<const std::uint8_t*>(buffer) + 2;
  EXPECT_FALSE(skinny_gemm_applies(p));
}

}  // namespace
}  // namespace pagoda::kernels
