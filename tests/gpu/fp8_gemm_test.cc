// FP8 W8A8 on the GPU: the per-token activation quantizer and RMSNorm's fused FP8 output against
// the host's reproduction of the same rule (bit for bit), and cuBLASLt's FP8 product with
// per-token x per-channel scales against float64 on the dequantized operands: cuBLASLt's own
// per-row scaling where it has it, and its fp32 sums + fp8_scale_epilogue (Hopper's path).
//
// Product tolerance: the codes' products are exact; Hopper's FP8 tensor cores add them with a
// narrower accumulator that cuBLASLt promotes to fp32 every few k-steps (no fast-accumulate), so
// |got - ref| <= u_out |ref| + 2^-10 sum |x w|; a wrong scale, row or channel is off by whole
// terms.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_device.h"
#include "kernels/gemm/fp8_linear.h"
#include "kernels/gemm/fp8_scale_epilogue.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_quantize.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/quant/random_quant_blocks.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;

struct HostFp8Rows {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
};

// fp8_row_scale.cuh's rule on the host: the same fp32 operations, so the same bits.
HostFp8Rows quantize_on_host(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
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

TEST(GpuFp8, QuantizeRowsIsTheHostRuleBitForBit) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const auto& [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
             {1, 1}, {7, 100}, {33, 4096}, {3, 4099}}) {
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

// RMSNorm's fused FP8 output is launch_fp8_quantize_rows of its 16-bit output, bit for bit, on
// the vector path (hidden % 8 == 0) and the scalar one, with and without a residual.
TEST(GpuFp8, RmsNormFusedOutputEqualsQuantizingItsOutput) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (std::int64_t hidden : {4096, 1001}) {
      for (bool with_residual : {false, true}) {
        SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " hidden " + std::to_string(hidden) +
                     (with_residual ? " residual" : ""));
        const std::int64_t tokens = 9;
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
        EXPECT_EQ(fused_scales.download(), scales.download());
        EXPECT_EQ(fused_codes.download(), codes.download());
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
  auto blas = cuda::BlasLt::create(32u << 20);
  ASSERT_TRUE(blas.ok());
  // cuBLASLt's per-row (OUTER_VEC) scaling exists from Blackwell on; sums + epilogue everywhere.
  std::vector<bool> scaled_by_cublas = {false};
  if ((*blas)->fp8_linear_supported()) scaled_by_cublas.push_back(true);
  std::mt19937 rng(29);
  for (const bool by_cublas : scaled_by_cublas)
    for (ScalarType out_type : {ScalarType::kBF16, ScalarType::kF16}) {
      for (const auto& [n, k] :
           std::vector<std::pair<std::int64_t, std::int64_t>>{{48, 64}, {256, 4096}, {112, 1040}}) {
        for (std::int64_t m : {1, 7, 16, 33, 257}) {
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
          std::vector<std::uint8_t> w_codes(static_cast<std::size_t>(n * k));
          for (std::uint8_t& c : w_codes) {
            do {
              c = static_cast<std::uint8_t>(rng());
            } while ((c & 0x7F) == 0x7F);  // E4M3's NaN codes
          }
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
          const double u_out = gpu_test::unit_roundoff(out_type);
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
              const double tol = u_out * std::abs(ref) + 0x1p-10 * magnitude + 1e-30;
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
// CPU dequantizes and on x quantized by the host rule (quantize_on_host above).
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
          const double tol = gpu_test::unit_roundoff(type) * std::abs(ref) + 0x1p-10 * magnitude;
          if (!(std::abs(g - ref) <= tol)) {
            ADD_FAILURE() << "y[" << i << ", " << j << "] = " << g << ", want " << ref;
            ++failures;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
