// FP8 W8A8 on the GPU: the per-token activation quantizer and RMSNorm's fused FP8 output against
// the host's reproduction of the same rule (bit for bit), cuBLASLt's FP8 product with per-token x
// per-channel scales against float64 on the dequantized operands (cuBLASLt's own per-row scaling
// where it has it, and its fp32 sums + fp8_scale_epilogue, Hopper's path), and the skinny kernel
// decode takes at m <= 16: bit for bit against the host on codes whose sums are exact, and beside
// cuBLASLt against float64 through the layer.
//
// Product tolerance (product_tolerance): the codes' products are exact; Hopper's FP8 tensor cores
// add them with a narrower accumulator that cuBLASLt promotes to fp32 every few k-steps (no
// fast-accumulate), and the skinny kernel's f16 mma.sync adds them in fp32 (the tensor cores
// align and truncate the addends), so |got - ref| <= u_out |ref| + 2^-10 sum |x w| for both, and
// the two paths are within twice that of each other; a wrong scale, row or channel is off by whole
// terms.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_device.h"
#include "kernels/gemm/fp8_linear.h"
#include "kernels/gemm/fp8_scale_epilogue.h"
#include "kernels/gemm/fp8_skinny_gemm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_quantize.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "tests/gpu/fp8_reference.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/quant/random_quant_blocks.h"

#if defined(PAGODA_CUDA_EMULATION)
#include "kernels/emulation/cublaslt_emulation.h"
#endif

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using fp8_testing::CodeSet;
using fp8_testing::exact_codes;
using fp8_testing::exact_sums;
using fp8_testing::finite_codes;
using fp8_testing::HostFp8Rows;
using fp8_testing::kSkinnyRows;
using fp8_testing::name_of;
using fp8_testing::quantize_on_host;
using fp8_testing::skinny_output;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;

// The bound in the header: one rounding to the output type, and 2^-10 of the terms' magnitude
// (sum |x w| + |bias|) for the tensor cores' accumulation.
double product_tolerance(ScalarType out_type, double ref, double magnitude) {
  return gpu_test::unit_roundoff(out_type) * std::abs(ref) + 0x1p-10 * magnitude + 1e-30;
}

TEST(GpuFp8, QuantizeRowsIsTheHostRuleBitForBit) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {7, 100}, {gpu_test::kEmulated ? 9 : 33, 4096}, {3, 4099}}) {
      SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " " + std::to_string(rows) + "x" +
                   std::to_string(cols));
      std::vector<float> x =
          gpu_test::random_vector(static_cast<std::size_t>(rows * cols), rng, -30.0f, 30.0f);
      if (rows > 1) std::fill(x.begin(), x.begin() + cols, 0.0f);  // a zero row
      x = gpu_test::round_to(x, type);
      DeviceArray dx(x, type);
      DeviceVector<std::uint8_t> codes(x.size());
      DeviceVector<float> scales(static_cast<std::size_t>(rows));
      ASSERT_TRUE(launch_fp8_quantize_rows({.x = dx.data(),
                                            .codes = codes.data(),
                                            .scales = scales.data(),
                                            .rows = rows,
                                            .cols = cols,
                                            .dtype = type},
                                           nullptr)
                      .ok());
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const HostFp8Rows want = quantize_on_host(x, rows, cols);
      EXPECT_EQ(scales.download(), want.scales);
      EXPECT_EQ(codes.download(), want.codes);
    }
  }
}

// RMSNorm's fused FP8 output is the host rule on its 16-bit output and launch_fp8_quantize_rows
// of it, bit for bit, on the vector path (hidden % 8 == 0) and the scalar one, with and without a
// residual.
TEST(GpuFp8, RmsNormFusedOutputEqualsQuantizingItsOutput) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (std::int64_t hidden : {4096, 1001}) {
      for (bool with_residual : {false, true}) {
        SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " hidden " + std::to_string(hidden) +
                     (with_residual ? " residual" : ""));
        const std::int64_t tokens = gpu_test::kEmulated ? 5 : 9;
        const auto n = static_cast<std::size_t>(tokens * hidden);
        DeviceArray x(gpu_test::round_to(gpu_test::random_vector(n, rng), type), type);
        DeviceArray residual(gpu_test::round_to(gpu_test::random_vector(n, rng), type), type);
        DeviceArray weight(
            gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(hidden), rng),
                               type),
            type);
        DeviceArray out(n, type);
        DeviceVector<std::uint8_t> fused_codes(n), codes(n);
        DeviceVector<float> fused_scales(tokens), scales(tokens);
        ASSERT_TRUE(launch_rms_norm({.x = x.data(),
                                     .residual = with_residual ? residual.data() : nullptr,
                                     .weight = weight.data(),
                                     .out = out.data(),
                                     .num_tokens = tokens,
                                     .hidden = hidden,
                                     .eps = 1e-6f,
                                     .dtype = type,
                                     .out_fp8 = fused_codes.data(),
                                     .out_fp8_scales = fused_scales.data()},
                                    nullptr)
                        .ok());
        ASSERT_TRUE(launch_fp8_quantize_rows({.x = out.data(),
                                              .codes = codes.data(),
                                              .scales = scales.data(),
                                              .rows = tokens,
                                              .cols = hidden,
                                              .dtype = type},
                                             nullptr)
                        .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const HostFp8Rows want = quantize_on_host(out.download(), tokens, hidden);
        EXPECT_EQ(fused_scales.download(), want.scales);
        EXPECT_EQ(fused_codes.download(), want.codes);
        EXPECT_EQ(scales.download(), want.scales);
        EXPECT_EQ(codes.download(), want.codes);
      }
    }
  }
}

bool has_fp8_tensor_cores() {
  auto props = cuda::current_device_properties();
  return props.ok() && props->compute_major * 10 + props->compute_minor >= 89;
}

TEST(GpuFp8, LinearMatchesFloat64OnTheDequantizedOperands) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!has_fp8_tensor_cores()) GTEST_SKIP() << "FP8 tensor cores need sm_89 or later";
#if defined(PAGODA_CUDA_EMULATION)
  // The emulated cuBLASLt answers as Hopper's (no OUTER_VEC algorithm) unless told it has them,
  // as Blackwell's: told so for this test, both paths run.
  emulation::set_cublaslt_outer_vec_scales(true);
  struct Restore {
    ~Restore() { emulation::set_cublaslt_outer_vec_scales(false); }
  } restore;
#endif
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  if (gpu_test::kEmulated) {
    ASSERT_TRUE((*blas)->fp8_linear_supported());
  }
  // cuBLASLt's per-row (OUTER_VEC) scaling exists from Blackwell on; sums + epilogue everywhere.
  std::vector<bool> scaled_by_cublas = {false};
  if ((*blas)->fp8_linear_supported()) scaled_by_cublas.push_back(true);
  std::mt19937 rng(29);
  for (const bool by_cublas : scaled_by_cublas)
    for (ScalarType out_type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (const auto& [n, k] : gpu_test::pick<std::pair<std::int64_t, std::int64_t>>(
               {{48, 64}, {256, 4096}, {112, 1040}}, {{48, 64}, {112, 1040}})) {
        for (std::int64_t m : gpu_test::pick<std::int64_t>({1, 7, 16, 33, 257}, {1, 7, 33, 129})) {
          SCOPED_TRACE(std::string(by_cublas ? "cublas scales " : "epilogue ") +
                       gpu_test::name_of(out_type) + " m=" + std::to_string(m) +
                       " n=" + std::to_string(n) + " k=" + std::to_string(k));
          // Activations quantized on the device as the executor does; weights as random finite
          // codes with per-channel scales.
          const std::vector<float> x = gpu_test::round_to(
              gpu_test::random_vector(static_cast<std::size_t>(m * k), rng, -4.0f, 4.0f), out_type);
          DeviceArray dx(x, out_type);
          DeviceVector<std::uint8_t> x_codes(x.size());
          DeviceVector<float> x_scales(static_cast<std::size_t>(m));
          ASSERT_TRUE(launch_fp8_quantize_rows({.x = dx.data(),
                                                .codes = x_codes.data(),
                                                .scales = x_scales.data(),
                                                .rows = m,
                                                .cols = k,
                                                .dtype = out_type},
                                               nullptr)
                          .ok());
          const std::vector<std::uint8_t> w_codes =
              finite_codes(static_cast<std::size_t>(n * k), rng);
          const std::vector<float> w_scales =
              gpu_test::random_vector(static_cast<std::size_t>(n), rng, 1.0f / 4096, 1.0f / 256);
          const std::vector<float> bias = gpu_test::round_to(
              gpu_test::random_vector(static_cast<std::size_t>(n), rng), out_type);
          DeviceVector<std::uint8_t> dw(w_codes);
          DeviceVector<float> dws(w_scales);
          DeviceArray db(bias, out_type);
          DeviceArray dy(static_cast<std::size_t>(m * n), out_type);
          dy.poison();
          const bool with_bias = m % 2 == 1;
          Status s;
          if (by_cublas) {
            s = (*blas)->linear_fp8({.x = x_codes.data(),
                                     .x_scales = x_scales.data(),
                                     .w = dw.data(),
                                     .w_scales = dws.data(),
                                     .bias = with_bias ? db.data() : nullptr,
                                     .y = dy.data(),
                                     .m = m,
                                     .n = n,
                                     .k = k,
                                     .output_type = out_type},
                                    nullptr);
          } else {
            DeviceVector<float> sums(static_cast<std::size_t>(m * n));
            s = (*blas)->linear_fp8_sums(
                {.x = x_codes.data(), .w = dw.data(), .sums = sums.data(), .m = m, .n = n, .k = k},
                nullptr);
            if (s.ok()) {
              s = launch_fp8_scale_epilogue({.sums = sums.data(),
                                             .x_scales = x_scales.data(),
                                             .w_scales = dws.data(),
                                             .bias = with_bias ? db.data() : nullptr,
                                             .y = dy.data(),
                                             .m = m,
                                             .n = n,
                                             .dtype = out_type},
                                            nullptr);
            }
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          }
          ASSERT_TRUE(s.ok()) << s.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const std::vector<float> got = dy.download();
          const std::vector<std::uint8_t> xc = x_codes.download();
          const std::vector<float> xs = x_scales.download();
          int failures = 0;
          for (std::int64_t i = 0; i < m && failures < 5; ++i) {
            for (std::int64_t j = 0; j < n && failures < 5; ++j) {
              double ref = with_bias ? bias[static_cast<std::size_t>(j)] : 0.0;
              double magnitude = std::abs(ref);
              for (std::int64_t c = 0; c < k; ++c) {
                const double p = static_cast<double>(
                                     fp8_e4m3_to_float(xc[static_cast<std::size_t>(i * k + c)])) *
                                 xs[static_cast<std::size_t>(i)] *
                                 fp8_e4m3_to_float(w_codes[static_cast<std::size_t>(j * k + c)]) *
                                 w_scales[static_cast<std::size_t>(j)];
                ref += p;
                magnitude += std::abs(p);
              }
              const double g = got[static_cast<std::size_t>(i * n + j)];
              const double tol = product_tolerance(out_type, ref, magnitude);
              if (!(std::abs(g - ref) <= tol)) {
                ADD_FAILURE() << "y[" << i << ", " << j << "] = " << g << ", want " << ref << " +- "
                              << tol;
                ++failures;
              }
            }
          }
        }
      }
    }
}

// The layer the executor calls, from F8_S blocks: the same product as float64 on the weights the
// CPU dequantizes and on x quantized by the host rule (fp8_reference.h).
TEST(GpuFp8, LinearLayerFromCpuBlocks) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!has_fp8_tensor_cores()) GTEST_SKIP() << "FP8 tensor cores need sm_89 or later";
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  std::mt19937_64 rng(31);
  std::mt19937 rng32(37);
  // With 64 KB of sums per chunk, 300 rows of 96 channels take three chunks of 128 rows.
  for (const std::size_t chunk_bytes : {Fp8Linear::kSumsChunkBytes, std::size_t{64} << 10}) {
    const std::int64_t n = 96, k = 1024;
    SCOPED_TRACE("sums chunk bytes " + std::to_string(chunk_bytes));
    const quant::QuantizedMatrix q = quant::testing::random_f8_s(rng, n, k, true);
    StatusOr<quant::Fp8ChannelMatrix> split = quant::split_fp8_per_channel(q);
    ASSERT_TRUE(split.ok());
    StatusOr<Fp8Linear> layer = Fp8Linear::upload(*split, chunk_bytes);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    std::vector<float> w(static_cast<std::size_t>(n * k));
    ASSERT_TRUE(dequantize(DType::kF8_S, q.bytes, w).ok());
    for (std::int64_t m : {1, 5, 64, 300}) {
      SCOPED_TRACE("m=" + std::to_string(m));
      const ScalarType type = ScalarType::kBF16;
      const std::vector<float> x = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(m * k), rng32, -3.0f, 3.0f), type);
      const HostFp8Rows xq = quantize_on_host(x, m, k);
      DeviceArray dx(x, type), dy(static_cast<std::size_t>(m * n), type);
      dy.poison();
      DeviceVector<std::uint8_t> scratch(layer->scratch_bytes(m));
      const Status st = layer->forward(dx.data(), m, nullptr, dy.data(), type, **blas,
                                       scratch.data(), layer->scratch_bytes(m), nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = dy.download();
      int failures = 0;
      for (std::int64_t i = 0; i < m && failures < 5; ++i) {
        for (std::int64_t j = 0; j < n && failures < 5; ++j) {
          double ref = 0.0, magnitude = 0.0;
          for (std::int64_t c = 0; c < k; ++c) {
            const auto xi = static_cast<std::size_t>(i * k + c);
            const double p = static_cast<double>(fp8_e4m3_to_float(xq.codes[xi])) *
                             xq.scales[static_cast<std::size_t>(i)] *
                             w[static_cast<std::size_t>(j * k + c)];
            ref += p;
            magnitude += std::abs(p);
          }
          const double g = got[static_cast<std::size_t>(i * n + j)];
          const double tol = product_tolerance(type, ref, magnitude);
          if (!(std::abs(g - ref) <= tol)) {
            ADD_FAILURE() << "y[" << i << ", " << j << "] = " << g << ", want " << ref;
            ++failures;
          }
        }
      }
    }
  }
}

// --- The skinny kernel (fp8_skinny_gemm.h) ---

// launch_fp8_skinny_gemm on [16, k] x codes from `x_set` and [n, k] weight codes from `w_set`, at
// every m of kSkinnyRows, bf16 and f16 out, with and without bias, through both variants, against
// the host's exact sums.
// `misalign` bytes before x and w in their buffers take the byte loads even at k % 16 == 0.
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
  DeviceVector<std::uint8_t> dx(x_padded), dw(w_padded);
  DeviceVector<float> dxs(x_scales), dws(w_scales);
  // What decides the loads: 16-byte ones exactly where the kernel can take them.
  const auto aligned16 = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  };
  ASSERT_EQ(aligned16(dx.data() + misalign) && aligned16(dw.data() + misalign), misalign == 0);
  for (const Fp8SkinnyVariant variant :
       {Fp8SkinnyVariant::kWholeSpan, Fp8SkinnyVariant::kPipelined}) {
    for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
      const std::vector<float> bias = gpu_test::round_to(bias_values, type);
      DeviceArray db(bias, type);
      for (const bool with_bias : {false, true}) {
        for (const std::int64_t m : kSkinnyRows) {
          if (gpu_test::kEmulated && with_bias != (m % 2 == 1)) continue;  // bias at odd m there
          SCOPED_TRACE(
              std::string(variant == Fp8SkinnyVariant::kPipelined ? "pipelined " : "whole-span ") +
              gpu_test::name_of(type) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
              " k=" + std::to_string(k) + " x " + name_of(x_set) + " w " + name_of(w_set) +
              (with_bias ? " bias" : "") + " misalign " + std::to_string(misalign));
          DeviceArray dy(at(m * n), type);
          dy.poison();
          const Status s = launch_fp8_skinny_gemm({.x = dx.data() + misalign,
                                                   .x_scales = dxs.data(),
                                                   .w = dw.data() + misalign,
                                                   .w_scales = dws.data(),
                                                   .bias = with_bias ? db.data() : nullptr,
                                                   .y = dy.data(),
                                                   .m = m,
                                                   .n = n,
                                                   .k = k,
                                                   .dtype = type,
                                                   .variant = variant},
                                                  nullptr);
          ASSERT_TRUE(s.ok()) << s.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const std::vector<float> want = skinny_output(
              sums, x_scales, w_scales, with_bias ? bias : std::vector<float>{}, m, n, type);
          const std::vector<float> got = dy.download();
          int failures = 0;
          for (std::size_t e = 0; e < want.size() && failures < 5; ++e) {
            if (!(got[e] == want[e])) {
              ADD_FAILURE() << "y[" << e / at(n) << ", " << e % at(n) << "] = " << got[e]
                            << ", want " << want[e];
              ++failures;
            }
          }
        }
      }
    }
  }
}

// Small shapes through every path of the kernel: k within one load (16), not a multiple of 16
// (40: byte loads, a tail), a multiple of 16 but not of a warp's 512-column span (1040); channels
// within one CTA's 16 (1, 7) and past whole CTAs (129); subnormal codes on either side; x and w
// misaligned at k % 16 == 0 (byte loads).
TEST(GpuFp8, SkinnyGemmIsExactOnExactlySummableCodes) {
  PAGODA_SKIP_WITHOUT_GPU();
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
    expect_skinny_exact(gpu_test::kEmulated ? 17 : 129, 1040, x_set, w_set, rng);
  }
  expect_skinny_exact(gpu_test::kEmulated ? 33 : 129, 1040, CodeSet::kIntegers, CodeSet::kIntegers,
                      rng, 3);
}

// Llama-3-8B's k (4096: whole spans; 4100: a 4-code tail, byte loads) and the pipelined loop's
// stage boundaries (2352: a tail inside a span's second 256-column stage, vector; 2340: byte
// loads; 2304: a span ending at a stage boundary), and a weight of 6150 rows (384 whole CTAs and a
// partial one; 150 on the emulation), with the small shapes' other sizes.
TEST(GpuFp8, SkinnyGemmIsExactAtModelShapes) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  for (const std::int64_t n : gpu_test::pick<std::int64_t>({1, 7, 129, 6150}, {40})) {
    for (const std::int64_t k : {4096, 4100, 2352, 2340, 2304}) {
      expect_skinny_exact(n, k, CodeSet::kIntegers, CodeSet::kIntegers, rng);
    }
  }
  for (const std::int64_t k : gpu_test::pick<std::int64_t>({16, 40}, {4100})) {
    expect_skinny_exact(gpu_test::kEmulated ? 150 : 6150, k, CodeSet::kIntegers, CodeSet::kIntegers,
                        rng);
  }
}

// The two loops give each warp the same columns in the same order, so on codes whose sums round
// (random finite codes, unlike the exact sets above) they still agree bit for bit: at k with no
// whole span, an odd and an even number of spans per warp, tails in either stage, and byte loads
// (k = 100); on random codes, and on ones with cancelling pairs, whose sums' bits show the
// columns' order above the output's rounding.
TEST(GpuFp8, SkinnyGemmLoopsAgreeBitForBitOnRandomCodes) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(47);
  const std::int64_t n = gpu_test::kEmulated ? 20 : 40;
  for (const std::int64_t k : {16, 100, 1040, 2100, 2352, 4100, 6160, 14352}) {
    for (const bool cancelling : {false, true}) {
      const std::size_t rows = kFp8SkinnyGemmMaxRows;
      std::vector<std::uint8_t> x = finite_codes(rows * static_cast<std::size_t>(k), rng);
      std::vector<std::uint8_t> w = finite_codes(static_cast<std::size_t>(n * k), rng);
      if (cancelling) fp8_testing::add_cancelling_pairs(x, w, n, k);
      DeviceVector<std::uint8_t> dx(x), dw(w);
      DeviceVector<float> dxs(gpu_test::random_vector(rows, rng, 1.0f / 512, 1.0f / 128));
      DeviceVector<float> dws(
          gpu_test::random_vector(static_cast<std::size_t>(n), rng, 1.0f / 4096, 1.0f / 256));
      for (const std::int64_t m : {1, 7, 16}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) +
                     (cancelling ? " cancelling" : ""));
        std::vector<std::vector<float>> outs;
        for (const Fp8SkinnyVariant variant :
             {Fp8SkinnyVariant::kWholeSpan, Fp8SkinnyVariant::kPipelined}) {
          DeviceArray dy(static_cast<std::size_t>(m * n), ScalarType::kBF16);
          dy.poison();
          const Status st = launch_fp8_skinny_gemm({.x = dx.data(),
                                                    .x_scales = dxs.data(),
                                                    .w = dw.data(),
                                                    .w_scales = dws.data(),
                                                    .y = dy.data(),
                                                    .m = m,
                                                    .n = n,
                                                    .k = k,
                                                    .dtype = ScalarType::kBF16,
                                                    .variant = variant},
                                                   nullptr);
          ASSERT_TRUE(st.ok()) << st.to_string();
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          outs.push_back(dy.download());
        }
        for (std::size_t e = 0; e < outs[0].size(); ++e) {
          ASSERT_TRUE(std::isfinite(outs[0][e])) << "whole-span y[" << e << "]";
          ASSERT_EQ(outs[1][e], outs[0][e]) << "y[" << e / n << ", " << e % n << "]";
        }
      }
    }
  }
}

// Both paths through the layer (Fp8Linear::forward_quantized) on device-quantized activations and
// random finite weight codes: each within product_tolerance of float64 on the dequantized
// operands, so within twice it of each other. kAuto is the skinny kernel bit for bit up to
// kFp8SkinnyGemmMaxRows and cuBLASLt past it, where kSkinny is refused.
TEST(GpuFp8, SkinnyGemmAndCublasLtAgreeThroughTheLayer) {
  PAGODA_SKIP_WITHOUT_GPU();
  if (!has_fp8_tensor_cores()) GTEST_SKIP() << "FP8 tensor cores need sm_89 or later";
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  std::mt19937 rng(47);
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  struct Case {
    std::int64_t n, k;
    std::vector<ScalarType> types;
    std::vector<std::int64_t> ms;
  };
  const std::vector<std::int64_t> all_ms = {1, 2, 3, 7, 16, kFp8SkinnyGemmMaxRows + 1};
  // On the emulation, a model's k with fewer channels.
  for (const Case& c :
       gpu_test::pick<Case>({Case{48, 64, {ScalarType::kBF16, ScalarType::kF16}, all_ms},
                             Case{112, 1040, {ScalarType::kBF16, ScalarType::kF16}, all_ms},
                             Case{6144, 4096, {ScalarType::kBF16}, {1, 16, 17}}},
                            {Case{48, 64, {ScalarType::kBF16, ScalarType::kF16}, all_ms},
                             Case{112, 1040, {ScalarType::kBF16, ScalarType::kF16}, all_ms},
                             Case{64, 4096, {ScalarType::kBF16}, {1, 16, 17}}})) {
    quant::Fp8ChannelMatrix host{.rows = c.n, .cols = c.k};
    const std::vector<std::uint8_t> codes = finite_codes(at(c.n * c.k), rng);
    host.codes.assign(codes.begin(), codes.end());
    host.scales = gpu_test::random_vector(at(c.n), rng, 1.0f / 4096, 1.0f / 256);
    StatusOr<Fp8Linear> layer = Fp8Linear::upload(host);
    ASSERT_TRUE(layer.ok()) << layer.status().to_string();
    std::vector<double> w(host.codes.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = static_cast<double>(fp8_e4m3_to_float(host.codes[i])) * host.scales[i / at(c.k)];
    }
    for (const ScalarType type : c.types) {
      for (const std::int64_t m : c.ms) {
        SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " m=" + std::to_string(m) +
                     " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k));
        const std::vector<float> x =
            gpu_test::round_to(gpu_test::random_vector(at(m * c.k), rng, -4.0f, 4.0f), type);
        const std::vector<float> bias =
            gpu_test::round_to(gpu_test::random_vector(at(c.n), rng), type);
        const bool with_bias = m % 2 == 1;
        DeviceArray dx(x, type), db(bias, type);
        DeviceVector<std::uint8_t> x_codes(x.size());
        DeviceVector<float> x_scales(at(m));
        ASSERT_TRUE(launch_fp8_quantize_rows({.x = dx.data(),
                                              .codes = x_codes.data(),
                                              .scales = x_scales.data(),
                                              .rows = m,
                                              .cols = c.k,
                                              .dtype = type},
                                             nullptr)
                        .ok());
        DeviceVector<std::uint8_t> sums(layer->sums_scratch_bytes(m));
        const auto run = [&](Fp8GemmPath path, DeviceArray& y) {
          y.poison();
          return layer->forward_quantized(x_codes.data(), x_scales.data(), m,
                                          with_bias ? db.data() : nullptr, y.data(), type, **blas,
                                          sums.data(), layer->sums_scratch_bytes(m), nullptr, path);
        };
        DeviceArray y_skinny(at(m * c.n), type), y_cublas(at(m * c.n), type),
            y_auto(at(m * c.n), type);
        const bool skinny_applies = m <= kFp8SkinnyGemmMaxRows;
        const Status skinny = run(Fp8GemmPath::kSkinny, y_skinny);
        if (skinny_applies) {
          ASSERT_TRUE(skinny.ok()) << skinny.to_string();
        } else {
          EXPECT_EQ(skinny.code(), StatusCode::kInvalidArgument);
        }
        const Status cublas = run(Fp8GemmPath::kCublasLt, y_cublas);
        ASSERT_TRUE(cublas.ok()) << cublas.to_string();
        const Status automatic = run(Fp8GemmPath::kAuto, y_auto);
        ASSERT_TRUE(automatic.ok()) << automatic.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got_cublas = y_cublas.download();
        const std::vector<float> got_auto = y_auto.download();
        const std::vector<float> got_skinny =
            skinny_applies ? y_skinny.download() : std::vector<float>{};
        EXPECT_EQ(got_auto, skinny_applies ? got_skinny : got_cublas);
        const std::vector<std::uint8_t> xc = x_codes.download();
        const std::vector<float> xs = x_scales.download();
        int failures = 0;
        for (std::int64_t i = 0; i < m && failures < 5; ++i) {
          for (std::int64_t j = 0; j < c.n && failures < 5; ++j) {
            double ref = with_bias ? bias[at(j)] : 0.0;
            double magnitude = std::abs(ref);
            for (std::int64_t col = 0; col < c.k; ++col) {
              const double p = static_cast<double>(fp8_e4m3_to_float(xc[at(i * c.k + col)])) *
                               xs[at(i)] * w[at(j * c.k + col)];
              ref += p;
              magnitude += std::abs(p);
            }
            const double tol = product_tolerance(type, ref, magnitude);
            const std::size_t e = at(i * c.n + j);
            const auto fail = [&](const char* what, double got, double want, double bound) {
              ADD_FAILURE() << what << " y[" << i << ", " << j << "] = " << got << ", want " << want
                            << " +- " << bound;
              ++failures;
            };
            if (!(std::abs(got_cublas[e] - ref) <= tol)) fail("cublas", got_cublas[e], ref, tol);
            if (!skinny_applies) continue;
            if (!(std::abs(got_skinny[e] - ref) <= tol)) fail("skinny", got_skinny[e], ref, tol);
            if (!(std::abs(got_skinny[e] - got_cublas[e]) <= 2 * tol)) {
              fail("skinny vs cublas", got_skinny[e], got_cublas[e], 2 * tol);
            }
          }
        }
      }
    }
  }
}

// The launcher's checks come before any CUDA call, so they hold without a device.
TEST(Fp8SkinnyGemm, LauncherRefusesWhatItCannotRun) {
  const std::uint8_t codes[16] = {};
  const float scales[1] = {1.0f};
  std::uint16_t y[1] = {};
  const Fp8SkinnyGemmParams good{.x = codes,
                                 .x_scales = scales,
                                 .w = codes,
                                 .w_scales = scales,
                                 .y = y,
                                 .m = 1,
                                 .n = 1,
                                 .k = 16};
  const auto refused = [&](auto&& change) {
    Fp8SkinnyGemmParams p = good;
    change(p);
    return launch_fp8_skinny_gemm(p, nullptr).code() == StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.m = kFp8SkinnyGemmMaxRows + 1; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.m = -1; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.n = 0; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.k = 0; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.dtype = ScalarType::kF32; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.w = nullptr; }));
  EXPECT_TRUE(refused([](Fp8SkinnyGemmParams& p) { p.y = nullptr; }));
  Fp8SkinnyGemmParams empty = good;
  empty.m = 0;
  empty.x = nullptr;
  empty.y = nullptr;
  EXPECT_TRUE(launch_fp8_skinny_gemm(empty, nullptr).ok());  // m = 0: nothing to launch
}

}  // namespace
}  // namespace pagoda::kernels
