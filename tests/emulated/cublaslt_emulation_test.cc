// The emulated cuBLASLt (kernels/emulation/cublaslt_emulation.cc) against float64 on the same
// numbers: every transpose pair and type pair blas_lt.cc can ask for, at awkward shapes, with
// leading dimensions past the rows (the padding NaN, so a read of it shows), alpha, beta C (apart
// and in place) and the bias epilogue; FP8 TN with scalar scales and, when switched on, OUTER_VEC
// scale vectors; and what a stream's work keeps from the call (alpha, the descriptor) against what
// it reads when it runs (the operands), through a captured graph. BlasLt itself on top of it closes
// the file.
//
// Bound: the emulation sums exactly enough (double) to be correctly rounded but for ties, so each
// element is within half an ulp of D's type of the float64 result (u |ref|, plus half the spacing
// of f16's subnormals), and 2^-40 of the terms' magnitude for the sums' order.
#include "tests/emulated/cublaslt_emulation_test_util.h"

namespace pagoda::cublaslt_test {
namespace {

TEST(EmulatedCublasLt, MatchesFloat64OnEveryTransposeAndType) {
  std::mt19937 rng(1);
  struct Types {
    cudaDataType_t in, out;
  };
  int index = 0;
  for (const Types t : {Types{CUDA_R_32F, CUDA_R_32F}, Types{CUDA_R_16F, CUDA_R_16F},
                        Types{CUDA_R_16BF, CUDA_R_16BF}, Types{CUDA_R_16F, CUDA_R_32F},
                        Types{CUDA_R_16BF, CUDA_R_32F}}) {
    for (const cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      for (const cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
        // One row and column, partial blocks, and more than one row block (64) and column block.
        for (const auto& [m, n, k] :
             std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
                 {1, 1, 1}, {37, 5, 19}, {70, 9, 130}}) {
          ++index;
          const std::int64_t pad = index % 2 == 0 ? 3 : 0;
          const bool with_bias = index % 3 != 0;
          const float beta = index % 4 == 0 ? 0.0f : -1.5f;
          const std::string what =
              std::string(type_name(t.in)) + " -> " + type_name(t.out) +
              (ta == CUBLAS_OP_N ? " N" : " T") + (tb == CUBLAS_OP_N ? "N " : "T ") +
              std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " pad " +
              std::to_string(pad) + " beta " + std::to_string(beta) + (with_bias ? " bias" : "");
          const std::int64_t a_rows = ta == CUBLAS_OP_N ? m : k, a_cols = ta == CUBLAS_OP_N ? k : m;
          const std::int64_t b_rows = tb == CUBLAS_OP_N ? k : n, b_cols = tb == CUBLAS_OP_N ? n : k;
          const Matrix a = random_matrix(t.in, a_rows, a_cols, a_rows + pad, rng);
          const Matrix b = random_matrix(t.in, b_rows, b_cols, b_rows + 2 * pad, rng);
          const Matrix c = random_matrix(t.out, m, n, m + pad, rng);
          const Matrix d = random_matrix(t.out, m, n, m + 2 * pad, rng);
          ASSERT_EQ(
              cudaMemset(d.data(), 0xff, static_cast<std::size_t>(d.ld * n) * element_bytes(t.out)),
              cudaSuccess);  // NaN: beta = 0 must not read it
          const Bias bias = random_bias(t.out, m, rng);
          Call call = call_on(a, b, c, d, ta, tb);
          call.alpha = 0.75f;
          call.beta = beta;
          call.bias_epilogue = with_bias;
          call.bias = bias.bytes.data();
          const Outcome out = issue(call);
          ASSERT_EQ(out.heuristic, CUBLAS_STATUS_SUCCESS) << what;
          ASSERT_EQ(out.algorithms, 1) << what;
          ASSERT_EQ(out.matmul, CUBLAS_STATUS_SUCCESS) << what;
          expect_matches_float64(call, a, b, c, d,
                                 {.bias = with_bias ? bias.values : std::vector<double>{}}, what);
        }
      }
    }
  }
}

// C = D, as blas_lt.cc passes it: beta C reads D before it is written.
TEST(EmulatedCublasLt, AccumulatesInPlace) {
  std::mt19937 rng(2);
  for (const cudaDataType_t type : {CUDA_R_16BF, CUDA_R_32F}) {
    const std::int64_t m = 67, n = 6, k = 33;
    const Matrix a = random_matrix(type, k, m, k + 1, rng);
    const Matrix b = random_matrix(type, k, n, k, rng);
    const Matrix d = random_matrix(type, m, n, m + 5, rng);
    const Bias bias = random_bias(type, m, rng);
    Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
    call.beta = 1.0f;
    call.bias_epilogue = true;
    call.bias = bias.bytes.data();
    ASSERT_EQ(issue(call).matmul, CUBLAS_STATUS_SUCCESS);
    // d's host values are C's: the product rewrote only the device's.
    expect_matches_float64(call, a, b, d, d, {.bias = bias.values},
                           std::string("in place ") + type_name(type));
  }
}

// FP8 TN as BlasLt::linear_fp8_sums issues it (fp32 out) and with scalar scales and a bias
// (bfloat16 for an fp32 D, D's type otherwise).
TEST(EmulatedCublasLt, Fp8TnWithScalarScales) {
  std::mt19937 rng(3);
  const DeviceVector<float> a_scale(std::vector<float>{0.5f}), b_scale(std::vector<float>{0.375f});
  for (const cudaDataType_t out : {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F}) {
    for (const auto& [m, n, k] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
             {48, 7, 64}, {72, 5, 1040}}) {
      for (const bool scaled : {false, true}) {
        const std::string what = std::string("e4m3 -> ") + type_name(out) + " " +
                                 std::to_string(m) + "x" + std::to_string(n) + "x" +
                                 std::to_string(k) + (scaled ? " scaled, bias" : "");
        const Matrix a = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
        const Matrix b = random_matrix(CUDA_R_8F_E4M3, k, n, k + 16, rng);
        const Matrix d = random_matrix(out, m, n, m, rng);
        const cudaDataType_t bias_type = out == CUDA_R_32F ? CUDA_R_16BF : out;
        const Bias bias = random_bias(bias_type, m, rng);
        Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
        if (scaled) {
          call.a_scale = a_scale.data();
          call.b_scale = b_scale.data();
          call.bias_epilogue = true;
          call.bias = bias.bytes.data();
        }
        ASSERT_EQ(issue(call).matmul, CUBLAS_STATUS_SUCCESS) << what;
        expect_matches_float64(call, a, b, d, d,
                               {.scalar_scale = scaled ? 0.5 * 0.375 : 1.0,
                                .bias = scaled ? bias.values : std::vector<double>{}},
                               what);
      }
    }
  }
}

// Hopper's answer by default (INVALID_VALUE from the heuristic and the product, as GPU run 15
// saw); with the switch on, per-row scales of A (D's rows) and B (D's columns).
TEST(EmulatedCublasLt, OuterVecScalesFollowTheSwitch) {
  std::mt19937 rng(4);
  const std::int64_t m = 80, n = 9, k = 48;
  const Matrix a = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
  const Matrix b = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);
  const Matrix d = random_matrix(CUDA_R_16BF, m, n, m, rng);
  const std::vector<float> a_scales = gpu_test::random_vector(m, rng, 1.0f / 4096, 1.0f / 256);
  const std::vector<float> b_scales = gpu_test::random_vector(n, rng, 1.0f / 512, 1.0f / 128);
  const DeviceVector<float> da(a_scales), db(b_scales);
  const Bias bias = random_bias(CUDA_R_16BF, m, rng);
  Call call = call_on(a, b, d, d, CUBLAS_OP_T, CUBLAS_OP_N);
  call.outer_vec = true;
  call.a_scale = da.data();
  call.b_scale = db.data();
  call.bias_epilogue = true;
  call.bias = bias.bytes.data();

  EXPECT_FALSE(emulation::cublaslt_outer_vec_scales());
  const Outcome hopper = issue(call);
  EXPECT_EQ(hopper.heuristic, CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(hopper.algorithms, 0);
  EXPECT_EQ(hopper.matmul, CUBLAS_STATUS_INVALID_VALUE);

  const OuterVecScales on(true);
  const Outcome blackwell = issue(call);
  EXPECT_EQ(blackwell.heuristic, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(blackwell.matmul, CUBLAS_STATUS_SUCCESS);
  expect_matches_float64(call, a, b, d, d,
                         {.row_scale = {a_scales.begin(), a_scales.end()},
                          .col_scale = {b_scales.begin(), b_scales.end()},
                          .bias = bias.values},
                         "outer vec");
}

// Each change to a call cuBLASLt accepts, and what the heuristic and the product answer.
TEST(EmulatedCublasLt, StreamWorkKeepsTheCallsArguments) {
  std::mt19937 rng(6);
  const std::int64_t m = 24, n = 3, k = 16;
  const Matrix a = random_matrix(CUDA_R_32F, k, m, k, rng);
  const Matrix b = random_matrix(CUDA_R_32F, k, n, k, rng);
  const Matrix d = random_matrix(CUDA_R_32F, m, n, m, rng);
  const Bias kept = random_bias(CUDA_R_32F, m, rng), later = random_bias(CUDA_R_32F, m, rng);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t t = CUBLAS_OP_T;
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                           sizeof(epilogue)),
            CUBLAS_STATUS_SUCCESS);
  const auto set_bias = [&](const void* bias) {
    return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof(bias));
  };
  ASSERT_EQ(set_bias(kept.bytes.data()), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m), CUBLAS_STATUS_SUCCESS);

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  float alpha = 2.0f;
  const float beta = 0.0f;
  ASSERT_EQ(cublasLtMatmul(handle, desc, &alpha, a.data(), la, b.data(), lb, &beta, d.data(), ld,
                           d.data(), ld, nullptr, nullptr, 0, stream),
            CUBLAS_STATUS_SUCCESS);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  alpha = 5.0f;
  ASSERT_EQ(set_bias(later.bytes.data()), CUBLAS_STATUS_SUCCESS);

  // Each replay reads A as it is then (rewritten in place), with alpha 2 and the first bias.
  const Call call{.trans_a = CUBLAS_OP_T, .alpha = 2.0f};
  for (int replay = 0; replay < 2; ++replay) {
    const Matrix now = random_matrix(CUDA_R_32F, k, m, k, rng);
    ASSERT_EQ(cudaMemcpy(a.data(), now.data(), static_cast<std::size_t>(k * m) * sizeof(float),
                         cudaMemcpyDeviceToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    expect_matches_float64(call, now, b, d, d, {.bias = kept.values},
                           "replay " + std::to_string(replay));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

// Row-major y [m, n] against float64: x [m, k] (codes times x_scales when given) times w [n, k]
// (times w_scales) plus bias [n].
void expect_linear(const std::vector<float>& got, const std::vector<double>& x,
                   const std::vector<double>& w, const std::vector<double>& x_scales,
                   const std::vector<double>& w_scales, const std::vector<double>& bias,
                   std::int64_t m, std::int64_t n, std::int64_t k, cudaDataType_t out,
                   const std::string& what) {
  SCOPED_TRACE(what);
  int failures = 0;
  for (std::int64_t i = 0; i < m && failures < 5; ++i) {
    for (std::int64_t j = 0; j < n && failures < 5; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (std::int64_t q = 0; q < k; ++q) {
        const double p =
            x[static_cast<std::size_t>(i * k + q)] * w[static_cast<std::size_t>(j * k + q)];
        sum += p;
        magnitude += std::abs(p);
      }
      const double factor = (x_scales.empty() ? 1.0 : x_scales[static_cast<std::size_t>(i)]) *
                            (w_scales.empty() ? 1.0 : w_scales[static_cast<std::size_t>(j)]);
      const double ref = factor * sum + (bias.empty() ? 0.0 : bias[static_cast<std::size_t>(j)]);
      const double g = got[static_cast<std::size_t>(i * n + j)];
      const double bound = rounding(out, ref) + 0x1p-40 * std::abs(factor) * magnitude;
      if (!(std::abs(g - ref) <= bound)) {
        ADD_FAILURE() << "y[" << i << ", " << j << "] = " << g << ", want " << ref << " +- "
                      << bound;
        ++failures;
      }
    }
  }
}

cudaDataType_t data_type(ScalarType type) {
  return type == ScalarType::kF32 ? CUDA_R_32F
                                  : (type == ScalarType::kF16 ? CUDA_R_16F : CUDA_R_16BF);
}

// BlasLt (src/backend/cuda/blas_lt.cc) on the emulation, at the executor's test models' shapes
// (hidden 256) and an odd one: each kind of product it issues.
TEST(EmulatedCublasLt, BlasLtProductsMatchFloat64) {
  auto blas = cuda::BlasLt::create(1 << 20);
  ASSERT_TRUE(blas.ok()) << blas.status().to_string();
  std::mt19937 rng(7);
  const auto widen = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  struct Types {
    ScalarType in, out;
  };
  for (const Types t :
       {Types{ScalarType::kF32, ScalarType::kF32}, Types{ScalarType::kBF16, ScalarType::kBF16},
        Types{ScalarType::kF16, ScalarType::kF16}, Types{ScalarType::kBF16, ScalarType::kF32}}) {
    for (const auto& [n, k] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{256, 256}, {77, 100}}) {
      for (const std::int64_t m : {1, 7, 33}) {
        const bool with_bias = t.in == t.out && m != 7;
        const std::string what = std::string(gpu_test::name_of(t.in)) + " -> " +
                                 gpu_test::name_of(t.out) + " m=" + std::to_string(m) +
                                 " n=" + std::to_string(n) + " k=" + std::to_string(k) +
                                 (with_bias ? " bias" : "");
        const auto at = [](std::int64_t v) { return static_cast<std::size_t>(v); };
        const std::vector<float> x =
            gpu_test::round_to(gpu_test::random_vector(at(m * k), rng), t.in);
        const std::vector<float> w =
            gpu_test::round_to(gpu_test::random_vector(at(n * k), rng), t.in);
        const std::vector<float> bias =
            gpu_test::round_to(gpu_test::random_vector(at(n), rng), t.in);
        gpu_test::DeviceArray dx(x, t.in), dw(w, t.in), db(bias, t.in), dy(at(m * n), t.out);
        dy.poison();
        const Status s = (*blas)->linear({.x = dx.data(),
                                          .w = dw.data(),
                                          .bias = with_bias ? db.data() : nullptr,
                                          .y = dy.data(),
                                          .m = m,
                                          .n = n,
                                          .k = k,
                                          .input_type = t.in,
                                          .output_type = t.out},
                                         nullptr);
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_linear(dy.download(), widen(x), widen(w), {}, {},
                      with_bias ? widen(bias) : std::vector<double>{}, m, n, k, data_type(t.out),
                      what);
      }
    }
  }

  // FP8: the sums everywhere; per-row scales only where the switch gives them (Hopper: no).
  EXPECT_FALSE((*blas)->fp8_linear_supported());
  const OuterVecScales on(true);
  auto blackwell = cuda::BlasLt::create(1 << 20);
  ASSERT_TRUE(blackwell.ok());
  EXPECT_TRUE((*blackwell)->fp8_linear_supported());
  const std::int64_t n = 96, k = 256;
  for (const std::int64_t m : {1, 33}) {
    const Matrix x = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);  // [m, k] row-major
    const Matrix w = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);  // [n, k]
    const std::vector<float> xs =
        gpu_test::random_vector(static_cast<std::size_t>(m), rng, 1.0f / 512, 1.0f / 64);
    const std::vector<float> ws =
        gpu_test::random_vector(static_cast<std::size_t>(n), rng, 1.0f / 4096, 1.0f / 256);
    const DeviceVector<float> dxs(xs), dws(ws);
    DeviceVector<float> sums(static_cast<std::size_t>(m * n));
    ASSERT_TRUE((*blas)
                    ->linear_fp8_sums(
                        {.x = x.data(), .w = w.data(), .sums = sums.data(), .m = m, .n = n, .k = k},
                        nullptr)
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_linear(sums.download(), x.values, w.values, {}, {}, {}, m, n, k, CUDA_R_32F,
                  "fp8 sums m=" + std::to_string(m));
    for (const ScalarType out : {ScalarType::kBF16, ScalarType::kF16}) {
      const std::vector<float> bias =
          gpu_test::round_to(gpu_test::random_vector(static_cast<std::size_t>(n), rng), out);
      gpu_test::DeviceArray db(bias, out), dy(static_cast<std::size_t>(m * n), out);
      dy.poison();
      const Status s = (*blackwell)
                           ->linear_fp8({.x = x.data(),
                                         .x_scales = dxs.data(),
                                         .w = w.data(),
                                         .w_scales = dws.data(),
                                         .bias = db.data(),
                                         .y = dy.data(),
                                         .m = m,
                                         .n = n,
                                         .k = k,
                                         .output_type = out},
                                        nullptr);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_linear(
          dy.download(), x.values, w.values, widen(xs), widen(ws), widen(bias), m, n, k,
          data_type(out),
          std::string("fp8 scaled ") + gpu_test::name_of(out) + " m=" + std::to_string(m));
    }
  }
}

}  // namespace
}  // namespace pagoda::cublaslt_test
