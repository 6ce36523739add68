#include "backend/cuda/blas_lt.h"

#include <string>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

namespace {

cudaDataType_t cuda_data_type(ScalarType type) {
  switch (type) {
    case ScalarType::kF32: return CUDA_R_32F;
    case ScalarType::kF16: return CUDA_R_16F;
    case ScalarType::kBF16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}

}  // namespace

StatusOr<std::unique_ptr<BlasLt>> BlasLt::create(std::size_t workspace_bytes) {
  std::unique_ptr<BlasLt> blas(new BlasLt());
  PAGODA_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&blas->handle_));
  PAGODA_ASSIGN_OR_RETURN(blas->workspace_, DeviceBuffer::allocate(workspace_bytes));
  return blas;
}

BlasLt::~BlasLt() {
  for (auto& [key, plan] : plans_) destroy(plan);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void BlasLt::destroy(Plan& plan) {
  if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
  if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.d != nullptr) cublasLtMatrixLayoutDestroy(plan.d);
  plan = Plan{};
}

// cuBLASLt is column-major. Read column-major, row-major y[m, n] is a [n, m] matrix D, and
// y = x w^T becomes D = op(A) B with A = w seen as a column-major [k, n] matrix, transposed
// (op = T), and B = x seen as a column-major [k, m] matrix:
//
//   A: rows k, cols n, ld k (transa = T)    B: rows k, cols m, ld k    D: rows n, cols m, ld n
//
// This is the TN layout FP8 needs (both operands K-major). With scale vectors, cuBLASLt's A
// scale has one entry per row of D (n: the weight's channels) and B's one per column (m: tokens).
StatusOr<BlasLt::Plan*> BlasLt::plan_for(const PlanSpec& g) {
  const PlanKey key = key_of(g);
  if (auto it = plans_.find(key); it != plans_.end()) return &it->second;

  Plan plan;
  // Plain COMPUTE_32F: FP32 operands stay FP32 (no TF32), 16-bit operands accumulate in FP32.
  Status status =
      cublas_status(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                    "cublasLtMatmulDescCreate");
  const cublasOperation_t trans_a = CUBLAS_OP_T;
  const cublasOperation_t trans_b = CUBLAS_OP_N;
  if (status.ok()) {
    status = cublas_status(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &trans_a, sizeof(trans_a)),
                           "set TRANSA");
  }
  if (status.ok()) {
    status = cublas_status(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                          &trans_b, sizeof(trans_b)),
                           "set TRANSB");
  }
  if (status.ok() && g.scale_vectors) {
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    status = cublas_status(cublasLtMatmulDescSetAttribute(
                               plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)),
                           "set A_SCALE_MODE");
    if (status.ok()) {
      status = cublas_status(cublasLtMatmulDescSetAttribute(
                                 plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)),
                             "set B_SCALE_MODE");
    }
  }
  if (status.ok() && g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    status = cublas_status(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                          &epilogue, sizeof(epilogue)),
                           "set EPILOGUE");
  }
  const cudaDataType_t in = g.input;
  const cudaDataType_t out = g.output;
  if (status.ok()) {
    status = cublas_status(cublasLtMatrixLayoutCreate(&plan.a, in, g.k, g.n, g.k), "layout A");
  }
  if (status.ok()) {
    status = cublas_status(cublasLtMatrixLayoutCreate(&plan.b, in, g.k, g.m, g.k), "layout B");
  }
  if (status.ok()) {
    status = cublas_status(cublasLtMatrixLayoutCreate(&plan.d, out, g.n, g.m, g.n), "layout D");
  }
  cublasLtMatmulPreference_t preference = nullptr;
  if (status.ok()) {
    status = cublas_status(cublasLtMatmulPreferenceCreate(&preference), "preference");
  }
  if (status.ok()) {
    const std::size_t workspace_bytes = workspace_.bytes();
    status = cublas_status(
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace_bytes, sizeof(workspace_bytes)),
        "preference workspace");
  }
  if (status.ok()) {
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    status =
        cublas_status(cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d,
                                                     plan.d, preference, 1, &result, &returned),
                      "cublasLtMatmulAlgoGetHeuristic");
    if (status.ok() && returned == 0) {
      status = Status(g.scale_vectors ? StatusCode::kUnimplemented : StatusCode::kInternal,
                      "cuBLASLt has no algorithm for a " + std::to_string(g.m) + "x" +
                          std::to_string(g.n) + "x" + std::to_string(g.k) +
                          (g.scale_vectors ? " FP8 product with per-row scales"
                                           : " product of type " + std::to_string(in)));
    }
    if (status.ok()) plan.algo = result.algo;
  }
  if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
  if (!status.ok()) {
    destroy(plan);
    return status;
  }
  return &plans_.emplace(key, plan).first->second;
}

Status BlasLt::run(Plan& plan, const void* x, const void* w, const void* bias, void* y,
                   cudaStream_t stream) {
  if (bias != nullptr) {
    PAGODA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  PAGODA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(handle_, plan.desc, &alpha, w, plan.a, x, plan.b,
                                               &beta, y, plan.d, y, plan.d, &plan.algo,
                                               workspace_.data(), workspace_.bytes(), stream));
  return Status::ok_status();
}

Status BlasLt::linear(const LinearGemm& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) {
    return invalid_argument("linear: empty product " + std::to_string(g.m) + "x" +
                            std::to_string(g.n) + "x" + std::to_string(g.k));
  }
  if (g.output_type != g.input_type && g.output_type != ScalarType::kF32) {
    return invalid_argument("linear: output must be the input type or f32");
  }
  if (g.bias != nullptr && g.output_type != g.input_type) {
    return invalid_argument("linear: a bias needs the output in the input type");
  }
  PAGODA_ASSIGN_OR_RETURN(Plan * plan, plan_for({.m = g.m,
                                                 .n = g.n,
                                                 .k = g.k,
                                                 .input = cuda_data_type(g.input_type),
                                                 .output = cuda_data_type(g.output_type),
                                                 .bias = g.bias != nullptr}));
  return run(*plan, g.x, g.w, g.bias, g.y, stream);
}

Status BlasLt::linear_fp8(const Fp8LinearGemm& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.k % 16 != 0) {
    return invalid_argument("linear_fp8: a " + std::to_string(g.m) + "x" + std::to_string(g.n) +
                            "x" + std::to_string(g.k) +
                            " product (k must be a positive multiple of 16)");
  }
  if (g.output_type != ScalarType::kBF16 && g.output_type != ScalarType::kF16) {
    return invalid_argument("linear_fp8: the output must be bf16 or f16");
  }
  if (g.x_scales == nullptr || g.w_scales == nullptr) {
    return invalid_argument("linear_fp8: both scale vectors are required");
  }
  PAGODA_ASSIGN_OR_RETURN(Plan * plan, plan_for({.m = g.m,
                                                 .n = g.n,
                                                 .k = g.k,
                                                 .input = CUDA_R_8F_E4M3,
                                                 .output = cuda_data_type(g.output_type),
                                                 .bias = g.bias != nullptr,
                                                 .scale_vectors = true}));
  // A is the weight (its scale vector runs over D's rows, the channels), B the activations.
  PAGODA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.w_scales, sizeof(g.w_scales)));
  PAGODA_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(
      plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.x_scales, sizeof(g.x_scales)));
  return run(*plan, g.x, g.w, g.bias, g.y, stream);
}

Status BlasLt::linear_fp8_sums(const Fp8SumsGemm& g, cudaStream_t stream) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.k % 16 != 0) {
    return invalid_argument("linear_fp8_sums: a " + std::to_string(g.m) + "x" +
                            std::to_string(g.n) + "x" + std::to_string(g.k) +
                            " product (k must be a positive multiple of 16)");
  }
  PAGODA_ASSIGN_OR_RETURN(
      Plan * plan,
      plan_for({.m = g.m, .n = g.n, .k = g.k, .input = CUDA_R_8F_E4M3, .output = CUDA_R_32F}));
  return run(*plan, g.x, g.w, nullptr, g.sums, stream);
}

bool BlasLt::fp8_linear_supported() {
  if (fp8_supported_ < 0) {
    const StatusOr<Plan*> plan = plan_for({.m = 16,
                                           .n = 64,
                                           .k = 64,
                                           .input = CUDA_R_8F_E4M3,
                                           .output = CUDA_R_16BF,
                                           .scale_vectors = true});
    fp8_supported_ = plan.ok() ? 1 : 0;
  }
  return fp8_supported_ == 1;
}

}  // namespace pagoda::cuda
