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

/// y = (sx ⊗ sw) · (x_codes w_codes^T) (+ bias) with E4M3 operands (FP8 W8A8), row-major like
/// LinearGemm: each output (i, j) is the fp32 sum over k of the codes' products, times
/// x_scales[i] (the token's dynamic scale) and w_scales[j] (the channel's), plus bias[j], rounded
/// once to output_type. k must be a multiple of 16 (cuBLASLt's FP8 alignment).
struct Fp8LinearGemm {
  const void* x = nullptr;          ///< [m, k] E4M3 codes
  const float* x_scales = nullptr;  ///< [m], device
  const void* w = nullptr;          ///< [n, k] E4M3 codes
  const float* w_scales = nullptr;  ///< [n], device
  const void* bias = nullptr;       ///< [n], output_type; nullptr for none
  void* y = nullptr;                ///< [m, n], output_type
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  ScalarType output_type = ScalarType::kBF16;  ///< kBF16 or kF16
};

/// sums = x_codes w_codes^T in fp32 with E4M3 operands and no scaling: the first half of FP8 W8A8
/// where cuBLASLt cannot scale per row (kernels/gemm/fp8_scale_epilogue.h is the second).
struct Fp8SumsGemm {
  const void* x = nullptr;  ///< [m, k] E4M3 codes
  const void* w = nullptr;  ///< [n, k] E4M3 codes
  float* sums = nullptr;    ///< [m, n] fp32
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
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

  /// Issues `gemm` on `stream` with per-row scale vectors on both operands (cuBLASLt's
  /// OUTER_VEC_32F scale mode, Hopper and later). UNIMPLEMENTED when this GPU's cuBLASLt has no
  /// algorithm for it; the caller then takes fp8_linear_supported() == false.
  Status linear_fp8(const Fp8LinearGemm& gemm, cudaStream_t stream);

  /// Whether linear_fp8 runs here: probed once with a small product (cached). False on Hopper
  /// with CUDA 13's cuBLASLt (run 15): FP8 then goes through linear_fp8_sums and an epilogue.
  bool fp8_linear_supported();

  /// Issues `gemm` on `stream` (k a positive multiple of 16).
  Status linear_fp8_sums(const Fp8SumsGemm& gemm, cudaStream_t stream);

 private:
  /// What a plan depends on: the shape, the operand and output types, a bias epilogue, and
  /// per-row scale vectors (FP8).
  struct PlanSpec {
    std::int64_t m = 0, n = 0, k = 0;
    cudaDataType_t input = CUDA_R_32F;
    cudaDataType_t output = CUDA_R_32F;
    bool bias = false;
    bool scale_vectors = false;
  };
  using PlanKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, cudaDataType_t,
                             cudaDataType_t, bool, bool>;
  static PlanKey key_of(const PlanSpec& s) {
    return {s.m, s.n, s.k, s.input, s.output, s.bias, s.scale_vectors};
  }
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr;
    cublasLtMatrixLayout_t b = nullptr;
    cublasLtMatrixLayout_t d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };

  BlasLt() = default;
  StatusOr<Plan*> plan_for(const PlanSpec& spec);
  // D = op(w) x (+ bias) with `plan`: the weight is cuBLASLt's A, the activations its B.
  Status run(Plan& plan, const void* x, const void* w, const void* bias, void* y,
             cudaStream_t stream);
  static void destroy(Plan& plan);

  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<PlanKey, Plan> plans_;
  int fp8_supported_ = -1;  // -1: not probed yet
};

}  // namespace pagoda::cuda
