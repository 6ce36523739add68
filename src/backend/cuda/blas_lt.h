// Dense products through cuBLASLt: one handle and one workspace for the process, a cached plan
// (descriptors + heuristic algorithm) per shape, so a step only looks plans up.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::cuda {

/// y = x w^T (+ bias), PyTorch's Linear, all row-major:
///   x [m, k], w [n, k] (a weight as HF stores it), bias [n], y [m, n].
struct LinearGemm {
  const void* x = nullptr;     ///< [m, k], input_type
  const void* w = nullptr;     ///< [n, k], input_type
  const void* bias = nullptr;  ///< [n], input_type; nullptr for none
  void* y = nullptr;           ///< [m, n], output_type
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  ScalarType input_type = ScalarType::kBF16;
  /// input_type, or kF32 (the LM head writes fp32 logits from bf16/fp16 operands).
  ScalarType output_type = ScalarType::kBF16;
};

/// The cuBLASLt handle, its workspace and the plan cache. Not thread-safe: one per executor.
class BlasLt {
 public:
  /// Creates the handle and a `workspace_bytes` device workspace.
  static StatusOr<std::unique_ptr<BlasLt>> create(std::size_t workspace_bytes);
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  /// Issues `gemm` on `stream`. FP32 operands compute in full FP32 (no TF32) so tests can compare
  /// with the CPU backend tightly; BF16/FP16 accumulate in FP32.
  Status linear(const LinearGemm& gemm, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using PlanKey =
      std::tuple<std::int64_t, std::int64_t, std::int64_t, ScalarType, ScalarType, bool>;

  BlasLt() = default;
  StatusOr<Plan*> plan_for(const LinearGemm& gemm);
  static void destroy(Plan& plan);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<PlanKey, Plan> plans_;
};

}  // namespace pagoda::cuda
