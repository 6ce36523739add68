// The FP8 KV cache (kernels::KvCacheStorage::kFp8E4M3, --kv-cache-dtype fp8) in the CUDA
// executor, on the tiny Qwen3 checkpoint: half the bytes per block, and logits within twice
// e4m3's relative rounding (2^-4) of the bf16 cache's; with per-layer checkpoint scales (k_scale /
// v_scale) too, and each layer's own scale in use (a saturating scale on one layer moves the
// logits far more). The kernels' side (codes, attention over them) is fp8_kv_cache_kernels_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/cuda_model_executor.h"
#include "models/llama_weights.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/models/model_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;

TEST(GpuFp8KvCache, ExecutorWithAnFp8CacheStaysNearTheBf16One) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::string dir =
      gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) + "/forward/tiny_qwen3";
  auto files = open_model_files(dir);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const auto shared = std::make_shared<const ModelFiles>(std::move(*files));
  const auto open = [&](kernels::KvCacheStorage storage) {
    auto created = models::CudaModelExecutor::create(shared, {.dtype = ScalarType::kBF16,
                                                              .max_num_batched_tokens = 64,
                                                              .max_num_seqs = 1,
                                                              .max_model_len = 256,
                                                              .kv_cache_storage = storage});
    EXPECT_TRUE(created.ok()) << created.status().to_string();
    return created.ok() ? std::move(*created) : nullptr;
  };
  auto bf16 = open(kernels::KvCacheStorage::kActivations);
  auto fp8 = open(kernels::KvCacheStorage::kFp8E4M3);
  ASSERT_NE(bf16, nullptr);
  ASSERT_NE(fp8, nullptr);
  EXPECT_EQ(fp8->kv_cache_bytes_per_block(16) * 2, bf16->kv_cache_bytes_per_block(16));

  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 300);
  models::testing::SequenceRun bf16_run(*bf16, 16, 128);
  models::testing::SequenceRun fp8_run(*fp8, 16, 128);
  std::vector<float> want = bf16_run.prefill(prompt, 64);
  std::vector<float> got = fp8_run.prefill(prompt, 64);
  // K and V rounded to e4m3 (2^-4 relative) instead of bf16 (2^-8): twice that bounds the logits'
  // drift here; a cache read wrongly drifts by ~1.
  for (int step = 0; step < 12; ++step) {
    gpu_test::expect_close(got, want, 0.125, "fp8 cache, step " + std::to_string(step));
    const std::int32_t token = sampling::argmax(want);  // both follow the bf16 run's tokens
    want = bf16_run.step(std::span(&token, 1));
    got = fp8_run.step(std::span(&token, 1));
  }
}

// Checkpoint scales reach each layer's cache: RoPE + append writes e4m3(x / s_layer) and
// attention reads code x s_layer (the kernels' own tests check both against the host at s != 1).
// Moderate per-layer scales keep the logits within the scale-1 bound of the bf16 cache's; a
// scale that saturates every code (x / 1e-4 > 448 for |x| > 0.045) in only layer 0, or only
// layer 1, moves them several times further, so each layer's scale is the one used.
TEST(GpuFp8KvCache, ExecutorUsesEachLayersCheckpointScales) {
  PAGODA_SKIP_WITHOUT_GPU();
  const std::string dir =
      gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) + "/forward/tiny_qwen3";
  auto files = open_model_files(dir);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  auto host = models::load_llama_weights(*files);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  ASSERT_EQ(host->layers.size(), 2u);
  const auto run = [&](kernels::KvCacheStorage storage, const float(&k)[2], const float(&v)[2]) {
    models::LlamaWeights weights = *host;
    for (std::size_t l = 0; l < 2; ++l) {
      weights.layers[l].k_scale = k[l];
      weights.layers[l].v_scale = v[l];
    }
    auto gpu = models::CudaModelExecutor::create_from_weights(files->config, weights,
                                                              {.dtype = ScalarType::kBF16,
                                                               .max_num_batched_tokens = 64,
                                                               .max_num_seqs = 1,
                                                               .max_model_len = 256,
                                                               .kv_cache_storage = storage});
    EXPECT_TRUE(gpu.ok()) << gpu.status().to_string();
    if (!gpu.ok()) return std::vector<float>{};
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 300);
    models::testing::SequenceRun seq(**gpu, 16, 128);
    std::vector<float> logits = seq.prefill(prompt, 64);
    for (int step = 0; step < 4; ++step) {
      const std::int32_t token = 5 + step;
      const std::vector<float> next = seq.step(std::span(&token, 1));
      logits.insert(logits.end(), next.begin(), next.end());
    }
    return logits;
  };
  using kernels::KvCacheStorage;
  // A 16-bit cache ignores the scales.
  const std::vector<float> want = run(KvCacheStorage::kActivations, {1e-4f, 1e-4f}, {1e-4f, 1e-4f});
  ASSERT_EQ(want, run(KvCacheStorage::kActivations, {1.0f, 1.0f}, {1.0f, 1.0f}));
  const std::vector<float> calibrated = run(KvCacheStorage::kFp8E4M3, {0.5f, 1.5f}, {0.25f, 0.75f});
  gpu_test::expect_close(calibrated, want, 0.125, "fp8 cache with per-layer scales");
  const double drift = gpu_test::compare(calibrated, want).relative_l2;
  const double layer0 =
      gpu_test::compare(run(KvCacheStorage::kFp8E4M3, {1e-4f, 1.5f}, {1e-4f, 0.75f}), want)
          .relative_l2;
  const double layer1 =
      gpu_test::compare(run(KvCacheStorage::kFp8E4M3, {0.5f, 1e-4f}, {0.25f, 1e-4f}), want)
          .relative_l2;
  EXPECT_GT(layer0, std::max(4.0 * drift, 0.05)) << "layer 0's saturating scale went unused";
  EXPECT_GT(layer1, std::max(4.0 * drift, 0.05)) << "layer 1's saturating scale went unused";
}

}  // namespace
}  // namespace pagoda
