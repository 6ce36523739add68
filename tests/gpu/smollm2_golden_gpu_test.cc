// The real default model on the GPU: SmolLM2-135M-Instruct (Q4_1 GGUF: in bf16 its layers stay
// quantized, in the W4A16 kernel's GGUF form; in fp32 they are dequantized at upload) through
// CudaModelExecutor against transformers' fp32 forward pass, the same golden file the
// CPU model is checked with (tests/data/forward/smollm2_greedy.json: 29 prompts, 32 greedy
// tokens each, top-10 log-probabilities for the first 16 steps), by real_model_golden_gpu.h's
// rules (FP32: the reference's own fp32-vs-fp64 noise is <= 1.44e-4 against the 2e-3 bound;
// BF16: 30 layers of bf16 rounding, u = 2^-8).
//
// The model and golden file are found through PAGODA_SMOLLM2_GGUF and PAGODA_TEST_DATA (the GPU
// machine runs the binary away from the source tree), else the build's source paths.
#include "tests/gpu/real_model_golden_gpu.h"

namespace pagoda::models {
namespace {

using gpu_golden::RealModelGolden;

RealModelGolden smollm2() {
  return {.name = "SmolLM2",
          .model_path = gpu_test::smollm2_gguf_path(),
          .model_env = "PAGODA_SMOLLM2_GGUF",
          .golden_path = gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) +
                         "/forward/smollm2_greedy.json",
          .chunk = 512};  // chunked prefill on the 1100-1300 token prompts
}

TEST(GpuSmolLM2Golden, Fp32GreedyAndLogprobsMatchTransformers) {
  PAGODA_SKIP_WITHOUT_GPU();
  gpu_golden::run_real_model_golden(smollm2(), cuda::ScalarType::kF32);
}

TEST(GpuSmolLM2Golden, Bf16GreedyMatchesTransformersUntilANoiseTie) {
  PAGODA_SKIP_WITHOUT_GPU();
  gpu_golden::run_real_model_golden(smollm2(), cuda::ScalarType::kBF16);
}

}  // namespace
}  // namespace pagoda::models
