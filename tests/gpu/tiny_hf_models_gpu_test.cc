// The tiny random checkpoints of tests/golden/forward/make_tiny_hf_models.py on the GPU, each
// through CudaModelExecutor against the CPU executor on the same files, the CPU being the oracle
// (itself checked against transformers by TinyHfModelTest):
//   tiny_qwen3:  per-head q_norm / k_norm, head_dim 64 from the config, tied embeddings;
//   tiny_gemma3: gemma3_text: head_dim 256, 2 sliding layers with window 12 and 1 full layer,
//                their own RoPE bases, linear scaling on the full one, query_pre_attn_scalar 64,
//                sandwich norms, GeGLU, scaled embedding, tied.
// Each of logits.json's sequences is prefilled in chunks of 64 (Gemma's 150-token one crosses the
// window within and across chunks) and then decoded greedily for 16 steps on both backends.
// Gemma's two sliding layers run on their own KV groups in the shared pool (SequenceRun: a ring
// of 6 blocks each for steps of up to 64 tokens, so the 166 tokens reuse blocks their window
// left, and the table entries below each window are -1) through the eager kernels and the
// decode graphs.
//
//   FP32: the GPU sums in another order (cuBLASLt, no TF32): logits within 1e-4 of the row's
//         scale, and the argmaxes equal transformers' (every one wins by >= 5e-3).
//   BF16: weights and activations rounded to bf16 (u = 2^-8) over 2-3 layers: relative L2 of a
//         logits row within 5e-2 (the bound of the random-model CUDA test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/cuda_model_executor.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/models/model_test_util.h"

namespace pagoda::models {
namespace {

using gpu_test::env_or;

constexpr std::int64_t kChunk = 64;

void run_against_cpu(const std::string& model, cuda::ScalarType dtype) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::string dir = env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) + "/forward/" + model;
  std::ifstream in(dir + "/logits.json");
  ASSERT_TRUE(in.good()) << dir << "/logits.json is missing";
  const auto golden = nlohmann::json::parse(in);
  auto cpu = testing::open_executor(dir, kChunk);
  ASSERT_NE(cpu, nullptr);
  auto files = open_model_files(dir);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  auto gpu = CudaModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.dtype = dtype, .max_num_batched_tokens = kChunk, .max_num_seqs = 1, .max_model_len = 256});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  const bool exact = dtype == cuda::ScalarType::kF32;

  for (const auto& seq : golden["sequences"]) {
    const auto ids = seq["ids"].get<std::vector<std::int32_t>>();
    SCOPED_TRACE("sequence of " + std::to_string(ids.size()) + " tokens");
    const auto max_len = static_cast<std::int64_t>(ids.size()) + 16;
    testing::SequenceRun cpu_run(*cpu, 16, max_len, kChunk);
    testing::SequenceRun gpu_run(**gpu, 16, max_len, kChunk);
    if (model == "tiny_gemma3" && ids.size() == 150) {
      EXPECT_EQ(gpu_run.ring_blocks(), (std::vector<std::int64_t>{6, 6}));
    }
    std::vector<float> want = cpu_run.prefill(ids, kChunk);
    std::vector<float> got = gpu_run.prefill(ids, kChunk);
    EXPECT_EQ(sampling::argmax(want), seq["argmax"].back().get<std::int32_t>());
    for (int step = 0; step < 16; ++step) {
      SCOPED_TRACE("decode step " + std::to_string(step));
      ASSERT_EQ(got.size(), want.size());
      if (exact) {
        double scale = 1.0, worst = 0.0;
        for (std::size_t v = 0; v < want.size(); ++v) {
          scale = std::max(scale, static_cast<double>(std::abs(want[v])));
          worst = std::max(worst, static_cast<double>(std::abs(got[v] - want[v])));
        }
        EXPECT_LE(worst, 1e-4 * scale);
        EXPECT_EQ(sampling::argmax(got), sampling::argmax(want));
      } else {
        gpu_test::expect_close(got, want, 5e-2, "bf16 logits");
      }
      // Both sides continue with the CPU's token, so a bf16 near tie cannot fork the runs.
      const std::int32_t token = sampling::argmax(want);
      want = cpu_run.step(std::span(&token, 1));
      got = gpu_run.step(std::span(&token, 1));
    }
  }
}

class GpuTinyHfModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuTinyHfModel, Fp32MatchesCpu) {
  run_against_cpu(GetParam(), cuda::ScalarType::kF32);
}
TEST_P(GpuTinyHfModel, Bf16MatchesCpu) {
  run_against_cpu(GetParam(), cuda::ScalarType::kBF16);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GpuTinyHfModel,
                         ::testing::Values("tiny_qwen3", "tiny_mistral", "tiny_gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace pagoda::models
