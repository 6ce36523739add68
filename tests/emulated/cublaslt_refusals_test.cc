// What the emulated cuBLASLt refuses, as cuBLASLt does: shapes, types, alignment, null
// arguments, bad handles, attributes and algorithms (kernels/emulation/cublaslt_emulation.cc).
#include "tests/emulated/cublaslt_emulation_test_util.h"

namespace pagoda::cublaslt_test {
namespace {

TEST(EmulatedCublasLt, RefusesWhatCublasLtRefuses) {
  std::mt19937 rng(5);
  const std::int64_t m = 16, n = 8, k = 64;
  const Matrix a16 = random_matrix(CUDA_R_16BF, k, m, k, rng);
  const Matrix b16 = random_matrix(CUDA_R_16BF, k, n, k, rng);
  const Matrix d16 = random_matrix(CUDA_R_16BF, m, n, m, rng);
  const Matrix a8 = random_matrix(CUDA_R_8F_E4M3, k, m, k, rng);
  const Matrix b8 = random_matrix(CUDA_R_8F_E4M3, k, n, k, rng);
  const Bias bias = random_bias(CUDA_R_16BF, m, rng);
  const DeviceVector<float> scale(std::vector<float>(m, 1.0f));
  Call good16 = call_on(a16, b16, d16, d16, CUBLAS_OP_T, CUBLAS_OP_N);
  good16.bias_epilogue = true;
  good16.bias = bias.bytes.data();
  const Call good8 = call_on(a8, b8, d16, d16, CUBLAS_OP_T, CUBLAS_OP_N);
  ASSERT_EQ(issue(good16).matmul, CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(issue(good8).matmul, CUBLAS_STATUS_SUCCESS);

  constexpr cublasStatus_t kOk = CUBLAS_STATUS_SUCCESS, kInvalid = CUBLAS_STATUS_INVALID_VALUE,
                           kUnsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  struct Case {
    const char* what;
    const Call& base;
    std::function<void(Call&)> change;
    cublasStatus_t heuristic, matmul;
  };
  const std::vector<Case> cases = {
      {"B's k differs from A's", good16, [](Call& c) { c.b_rows = k - 1, c.b_ld = k - 1; },
       kInvalid, kInvalid},
      {"C of another shape", good16, [](Call& c) { c.c_cols = n - 1; }, kInvalid, kInvalid},
      {"ld below the rows", good16, [](Call& c) { c.a_ld = k - 1; }, kInvalid, kInvalid},
      {"A and B of different types", good16, [](Call& c) { c.b_type = CUDA_R_16F; }, kUnsupported,
       kUnsupported},
      {"f16 in, bf16 out", good16, [](Call& c) { c.a_type = c.b_type = CUDA_R_16F; }, kUnsupported,
       kUnsupported},
      {"C's type not D's", good16, [](Call& c) { c.c_type = CUDA_R_32F; }, kUnsupported,
       kUnsupported},
      {"BIAS without its pointer", good16, [](Call& c) { c.bias = nullptr; }, kOk, kInvalid},
      {"no A", good16, [](Call& c) { c.a = nullptr; }, kOk, kInvalid},
      {"no alpha", good16, [](Call& c) { c.null_alpha = true; }, kOk, kInvalid},
      {"beta without C", good16, [](Call& c) { c.beta = 1.0f, c.c = nullptr; }, kOk, kInvalid},
      {"in place with another ld", good16, [](Call& c) { c.c_ld = m + 1; }, kOk, kInvalid},
      {"a scale on bf16 operands", good16, [&](Call& c) { c.a_scale = scale.data(); }, kInvalid,
       kInvalid},
      {"FP8 NN", good8,
       [](Call& c) {
         c.trans_a = CUBLAS_OP_N;
         std::swap(c.a_rows, c.a_cols);
         c.a_ld = c.a_rows;
       },
       kUnsupported, kUnsupported},
      {"FP8 with k = 40", good8, [](Call& c) { c.a_rows = c.b_rows = c.a_ld = c.b_ld = 40; },
       kUnsupported, kUnsupported},
      {"FP8 ld off 16 bytes", good8, [](Call& c) { c.b_ld = k + 8; }, kUnsupported, kUnsupported},
      {"FP8 A off 16 bytes", good8,
       [](Call& c) { c.a = static_cast<const std::uint8_t*>(c.a) + 1; }, kOk, kUnsupported},
      {"FP8 x bf16", good8, [](Call& c) { c.b_type = CUDA_R_16BF; }, kUnsupported, kUnsupported},
      {"FP8 out", good8, [](Call& c) { c.c_type = c.d_type = CUDA_R_8F_E4M3; }, kUnsupported,
       kUnsupported},
      {"OUTER_VEC on Hopper", good8,
       [&](Call& c) {
         c.outer_vec = true;
         c.a_scale = c.b_scale = scale.data();
       },
       kInvalid, kInvalid},
  };
  for (const Case& c : cases) {
    Call call = c.base;
    c.change(call);
    const Outcome out = issue(call);
    EXPECT_EQ(out.heuristic, c.heuristic) << c.what;
    EXPECT_EQ(out.algorithms, c.heuristic == kOk ? 1 : 0) << c.what;
    EXPECT_EQ(out.matmul, c.matmul) << c.what;
  }
  {
    const OuterVecScales on(true);
    Call call = good16;
    call.outer_vec = true;
    call.a_scale = call.b_scale = scale.data();
    EXPECT_EQ(issue(call).matmul, kInvalid) << "OUTER_VEC on bf16 operands";
  }
}

// Refusals outside a product's shape and pointers: handles, attributes, the heuristic's request,
// an algorithm found for other types.
TEST(EmulatedCublasLt, RefusesBadHandlesAttributesAndAlgorithms) {
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F),
            CUBLAS_STATUS_NOT_SUPPORTED);
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const std::int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);
  const std::int32_t bad_op = 7;
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &bad_op, sizeof(bad_op)),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
            CUBLAS_STATUS_INVALID_VALUE);
  const cublasLtEpilogue_t relu = CUBLASLT_EPILOGUE_RELU_BIAS;
  EXPECT_EQ(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &relu, sizeof(relu)),
      CUBLAS_STATUS_NOT_SUPPORTED);
  const std::int32_t device_mode = CUBLASLT_POINTER_MODE_DEVICE;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &device_mode,
                                           sizeof(device_mode)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  const std::int32_t block_scales = CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &block_scales,
                                           sizeof(block_scales)),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_8I, 4, 4, 4), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, -1), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  const std::uint32_t narrow = 1;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &narrow, sizeof(narrow)),
            CUBLAS_STATUS_INVALID_VALUE);

  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result{};
  int count = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, layout, layout, layout, layout,
                                           preference, 1, &result, &count),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, preference,
                                           0, &result, &count),
            CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout, layout, layout, preference,
                                           1, &result, &count),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(count, 1);

  // The fp32 algorithm on a bf16 product.
  DeviceVector<std::uint16_t> data(16);
  cublasLtMatrixLayout_t layout16 = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout16, CUDA_R_16BF, 4, 4, 4), CUBLAS_STATUS_SUCCESS);
  const float alpha = 1.0f, beta = 0.0f;
  const auto matmul = [&](cublasLtHandle_t h, const cublasLtMatmulAlgo_t* algo) {
    return cublasLtMatmul(h, desc, &alpha, data.data(), layout16, data.data(), layout16, &beta,
                          data.data(), layout16, data.data(), layout16, algo, nullptr, 0, nullptr);
  };
  EXPECT_EQ(matmul(handle, &result.algo), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(nullptr, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(matmul(handle, nullptr), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  cublasLtMatrixLayoutDestroy(layout16);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(handle);
}

// A product captured into a graph keeps what the call gave it (alpha from the host, the bias
// pointer in the descriptor, both changed after the call) and reads the operands at each replay,
// as on a GPU, where blas_lt.cc rewrites a plan's bias pointer before every product.

}  // namespace
}  // namespace pagoda::cublaslt_test
