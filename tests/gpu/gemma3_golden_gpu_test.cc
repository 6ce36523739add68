// The second real model on the GPU: Gemma 3 270M (Q4_K_M GGUF: Q5_0 / Q4_K / Q6_K / Q8_0,
// dequantized at upload; head_dim 256, 15 sliding-window layers of 512 and 3 full ones) through
// CudaModelExecutor against transformers' fp32 forward pass, the golden file the CPU model is
// checked with (tests/data/forward/gemma3_greedy.json: 15 prompts, two of them longer than twice
// the window, 32 greedy tokens each, top-10 log-probabilities for the first 16 steps), by
// real_model_golden_gpu.h's rules.
//
// The model is found through PAGODA_GEMMA3_GGUF (scripts/gpu_check.sh exports it when the
// checkout has it), else the build's source path; the test skips without it.
#include "tests/gpu/real_model_golden_gpu.h"

namespace pagoda::models {
namespace {

using gpu_golden::RealModelGolden;

RealModelGolden gemma3() {
  return {.name = "Gemma 3 270M",
          .model_path = gpu_test::env_or(
              "PAGODA_GEMMA3_GGUF",
              std::string(PAGODA_SOURCE_DIR) + "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf"),
          .model_env = "PAGODA_GEMMA3_GGUF",
          .golden_path = gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) +
                         "/forward/gemma3_greedy.json",
          // Chunked prefill: the 1000+ token prompts cross the 512-token window inside and
          // across chunks.
          .chunk = 384};
}

TEST(GpuGemma3Golden, Fp32GreedyAndLogprobsMatchTransformers) {
  PAGODA_SKIP_WITHOUT_GPU();
  gpu_golden::run_real_model_golden(gemma3(), cuda::ScalarType::kF32);
}

TEST(GpuGemma3Golden, Bf16GreedyMatchesTransformersUntilANoiseTie) {
  PAGODA_SKIP_WITHOUT_GPU();
  gpu_golden::run_real_model_golden(gemma3(), cuda::ScalarType::kBF16);
}

}  // namespace
}  // namespace pagoda::models
