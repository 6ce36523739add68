// Mixed steps on the CUDA executor: prompt chunks beside one-query sequences in one forward
// pass, where the prefill kernel skips the one-query sequences (skip_single_query) and the
// decode kernel runs them alone (decode_seq_ids). The CPU executor on the same files is the
// oracle; every step's logits are compared, and the executor's attention-path counts prove that
// the mixed steps took the split path (a step that fell back to the prefill kernel for all would
// match the CPU too).
//
// Schedule (4 sequences, per-step tokens; "d" = one decode token, the CPU's greedy choice):
//
//   step 0   A 0..19    B 0..6                           prefill
//   step 1   A 20..44   B d    C 0 (one-token prompt)    D 0..16     mixed: prefill over A..D
//                                                                    skipping B, C; decodes {B, C}
//   step 2   A d        B d    C d                       D 17..29    mixed: prefill over D alone;
//                                                                    decodes {A, B, C}
//   step 3   A d               C d                       D d         decode (a graph)
//   steps 4-9 every sequence d                                       decode (graphs)
//
// Awkward lengths against block size 16: A crosses a block inside step 1, D's chunks end at 17
// and 30. tiny_gemma3 adds head_dim 256, sliding window 12 on two of three layers (its own KV
// groups: rings of blocks, -1 below each window, which the decode kernel's table reads by
// sequence index) and a query_pre_attn_scalar scale; with a soft-cap set in its config, the
// soft-capped kernels. The FP8-cache run holds the mixed path to the BF16 cache's (the K/V
// codes' rounding, as gpu_fp8_kv_cache_test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/cpu_model_executor.h"
#include "models/cuda_model_executor.h"
#include "sampling/sampler.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/multi_sequence_run.h"
#include "tests/unit/models/model_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;

constexpr int kSeqs = 4;
constexpr std::int64_t kBlockSize = 16;
constexpr std::int64_t kMaxLen = 64;
constexpr std::int64_t kMaxChunk = 32;
constexpr int kSteps = 10;
constexpr int kMixedSteps = 2;  // steps 1 and 2
// Small enough to change tiny_gemma3's logits (HarnessMatchesOneSequenceAtATimeOnTheCpu checks).
constexpr double kSoftCap = 0.5;

std::shared_ptr<const ModelFiles> open_files(const std::string& model,
                                             std::optional<double> softcap = std::nullopt) {
  const std::string dir =
      gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) + "/forward/" + model;
  auto files = open_model_files(dir);
  EXPECT_TRUE(files.ok()) << files.status().to_string();
  if (!files.ok()) return nullptr;
  if (softcap) files->config.attn_logit_softcapping = softcap;
  return std::make_shared<const ModelFiles>(std::move(*files));
}

std::unique_ptr<models::CudaModelExecutor> open_cuda(
    const std::shared_ptr<const ModelFiles>& files, ScalarType dtype,
    kernels::KvCacheStorage storage = kernels::KvCacheStorage::kActivations) {
  auto created = models::CudaModelExecutor::create(files, {.dtype = dtype,
                                                           .max_num_batched_tokens = 64,
                                                           .max_num_seqs = kSeqs,
                                                           .max_model_len = kMaxLen,
                                                           .kv_cache_storage = storage});
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return created.ok() ? std::move(*created) : nullptr;
}

std::unique_ptr<models::CpuModelExecutor> open_cpu(const std::shared_ptr<const ModelFiles>& files) {
  auto created = models::CpuModelExecutor::create(
      files, {.num_threads = 2, .max_num_batched_tokens = 64, .max_model_len = kMaxLen});
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  return created.ok() ? std::move(*created) : nullptr;
}

// The prompts: fixed ids inside every tiny model's vocabulary.
std::vector<std::int32_t> prompt(int length, int seed) {
  std::vector<std::int32_t> ids;
  for (int i = 0; i < length; ++i) ids.push_back(3 + (i * 37 + seed * 101) % 250);
  return ids;
}

// Step `step`'s tokens per sequence (the schedule above); `next` holds each sequence's decode
// token (the oracle's greedy choice of the step before).
std::vector<std::vector<std::int32_t>> tokens_of(int step, const std::vector<std::int32_t>& next) {
  static const std::vector<std::int32_t> a = prompt(45, 0), b = prompt(7, 1), c = prompt(1, 2),
                                         d = prompt(30, 3);
  const auto part = [](const std::vector<std::int32_t>& p, int begin, int end) {
    return std::vector<std::int32_t>(p.begin() + begin, p.begin() + end);
  };
  const auto dec = [&](int s) { return std::vector<std::int32_t>{next[s]}; };
  switch (step) {
    case 0: return {part(a, 0, 20), b, {}, {}};
    case 1: return {part(a, 20, 45), dec(1), c, part(d, 0, 17)};
    case 2: return {dec(0), dec(1), dec(2), part(d, 17, 30)};
    case 3: return {dec(0), {}, dec(2), dec(3)};
    default: return {dec(0), dec(1), dec(2), dec(3)};
  }
}

// Which sequences have finished their prompt after `step` (their row's argmax is their next
// token; A's step-0 row is a chunk's, D's step-1 row too).
bool prompt_done(int step, int seq) {
  if (seq == 0) return step >= 1;
  if (seq == 3) return step >= 2;
  return true;
}

// Runs the schedule on `oracle` and `gpu`, comparing every step's logits: at FP32 within 1e-4
// of each row's scale with the same argmax, else a relative L2 of `tolerance`. Both follow the
// oracle's greedy tokens. Checks that the mixed steps took the split attention path.
void run_schedule(ModelExecutor& oracle, models::CudaModelExecutor& gpu, bool exact,
                  double tolerance, const std::string& label) {
  gpu_test::MultiSequenceRun want_run(oracle, kSeqs, kBlockSize, kMaxLen, kMaxChunk);
  gpu_test::MultiSequenceRun got_run(gpu, kSeqs, kBlockSize, kMaxLen, kMaxChunk);
  const auto vocab = static_cast<std::size_t>(oracle.info().vocab_size);
  const std::int64_t mixed_before = gpu.attention_path_counts().mixed;
  std::vector<std::int32_t> next(kSeqs, -1);
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(label + " step " + std::to_string(step));
    const auto tokens = tokens_of(step, next);
    const std::vector<float> want = want_run.step(tokens);
    const std::vector<float> got = got_run.step(tokens);
    ASSERT_EQ(got.size(), want.size());
    std::size_t row = 0;
    for (int s = 0; s < kSeqs; ++s) {
      if (tokens[s].empty()) continue;
      const std::span<const float> w(want.data() + row * vocab, vocab);
      const std::span<const float> g(got.data() + row * vocab, vocab);
      ++row;
      if (exact) {
        double scale = 1.0, worst = 0.0;
        for (std::size_t v = 0; v < vocab; ++v) {
          scale = std::max(scale, static_cast<double>(std::abs(w[v])));
          worst = std::max(worst, static_cast<double>(std::abs(g[v] - w[v])));
        }
        EXPECT_LE(worst, 1e-4 * scale) << "sequence " << s;
        EXPECT_EQ(sampling::argmax(g), sampling::argmax(w)) << "sequence " << s;
      } else {
        gpu_test::expect_close({g.begin(), g.end()}, {w.begin(), w.end()}, tolerance,
                               label + " sequence " + std::to_string(s));
      }
      if (prompt_done(step, s)) next[s] = sampling::argmax(w);
    }
  }
  EXPECT_EQ(gpu.attention_path_counts().mixed - mixed_before, kMixedSteps * gpu.info().num_layers)
      << "the mixed steps did not all split between the prefill and decode kernels";
}

void run_against_cpu(const std::string& model, ScalarType dtype,
                     std::optional<double> softcap = std::nullopt) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto files = open_files(model, softcap);
  ASSERT_NE(files, nullptr);
  auto cpu = open_cpu(files);
  auto gpu = open_cuda(files, dtype);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(gpu, nullptr);
  // BF16 weights and activations over 2-3 layers: the tiny models' bound (tiny_hf_models_gpu_test).
  run_schedule(*cpu, *gpu, dtype == ScalarType::kF32, 5e-2, model + " " + gpu_test::name_of(dtype));
}

TEST(GpuMixedStep, TinyQwen3Fp32MatchesCpu) {
  run_against_cpu("tiny_qwen3", ScalarType::kF32);
}

TEST(GpuMixedStep, TinyQwen3Bf16MatchesCpu) {
  run_against_cpu("tiny_qwen3", ScalarType::kBF16);
}

TEST(GpuMixedStep, TinyGemma3WindowsAndKvGroupsFp32MatchCpu) {
  run_against_cpu("tiny_gemma3", ScalarType::kF32);
}

TEST(GpuMixedStep, TinyGemma3WindowsAndKvGroupsBf16MatchCpu) {
  run_against_cpu("tiny_gemma3", ScalarType::kBF16);
}

// Gemma 3 with Gemma 2's attention soft-cap (attn_logit_softcapping) set: the CUDA-core prefill
// and the decode kernel at head_dim 256 apply it in mixed, prefill and decode (graph) steps. The
// cap changes the logits (HarnessMatchesOneSequenceAtATimeOnTheCpu), so a kernel that ignores it
// fails.
TEST(GpuMixedStep, TinyGemma3SoftCapMatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto capped = open_files("tiny_gemma3", kSoftCap);
  ASSERT_NE(capped, nullptr);
  for (const ScalarType dtype : {ScalarType::kF32, ScalarType::kBF16}) {
    auto cpu = open_cpu(capped);
    auto gpu = open_cuda(capped, dtype);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);
    run_schedule(*cpu, *gpu, dtype == ScalarType::kF32, 5e-2,
                 "tiny_gemma3 soft-cap " + std::string(gpu_test::name_of(dtype)));
  }
}

// The harness itself, on the CPU (runs without a GPU): the schedule through MultiSequenceRun
// gives each sequence the logits it gets alone (SequenceRun, one executor per sequence), KV
// groups and rings included, and the soft-cap of the test above changes tiny_gemma3's logits.
TEST(GpuMixedStep, HarnessMatchesOneSequenceAtATimeOnTheCpu) {
  for (const std::string model : {"tiny_qwen3", "tiny_gemma3"}) {
    SCOPED_TRACE(model);
    auto files = open_files(model);
    ASSERT_NE(files, nullptr);
    auto batched = open_cpu(files);
    ASSERT_NE(batched, nullptr);
    gpu_test::MultiSequenceRun run(*batched, kSeqs, kBlockSize, kMaxLen, kMaxChunk);
    std::vector<std::unique_ptr<models::CpuModelExecutor>> alone_executors;
    std::vector<std::unique_ptr<models::testing::SequenceRun>> alone;
    for (int s = 0; s < kSeqs; ++s) {
      alone_executors.push_back(open_cpu(files));
      ASSERT_NE(alone_executors.back(), nullptr);
      alone.push_back(std::make_unique<models::testing::SequenceRun>(
          *alone_executors.back(), kBlockSize, kMaxLen, kMaxChunk));
    }
    const auto vocab = static_cast<std::size_t>(batched->info().vocab_size);
    std::vector<std::int32_t> next(kSeqs, -1);
    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const auto tokens = tokens_of(step, next);
      const std::vector<float> got = run.step(tokens);
      std::size_t row = 0;
      for (int s = 0; s < kSeqs; ++s) {
        if (tokens[s].empty()) continue;
        const std::vector<float> want = alone[s]->step(tokens[s]);
        const std::vector<float> mine(got.begin() + row * vocab, got.begin() + (row + 1) * vocab);
        ++row;
        // Other row counts may sum in another order (1e-6); a harness error moves logits by O(1).
        gpu_test::expect_close(mine, want, 1e-4, model + " sequence " + std::to_string(s));
        if (prompt_done(step, s)) next[s] = sampling::argmax(want);
      }
      ASSERT_EQ(row * vocab, got.size());
    }
  }
  auto plain = open_files("tiny_gemma3");
  auto capped = open_files("tiny_gemma3", kSoftCap);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(capped, nullptr);
  auto cpu_plain = open_cpu(plain);
  auto cpu_capped = open_cpu(capped);
  ASSERT_NE(cpu_plain, nullptr);
  ASSERT_NE(cpu_capped, nullptr);
  gpu_test::MultiSequenceRun a(*cpu_plain, 1, kBlockSize, kMaxLen, kMaxChunk);
  gpu_test::MultiSequenceRun b(*cpu_capped, 1, kBlockSize, kMaxLen, kMaxChunk);
  const gpu_test::Comparison diff =
      gpu_test::compare(a.step({prompt(30, 5)}), b.step({prompt(30, 5)}));
  EXPECT_GT(diff.relative_l2, 1e-3) << "a soft-cap of " << kSoftCap << " changes nothing here";
}

// FP8 K/V codes in mixed steps (the decode kernel's and the tensor-core prefill's FP8 paths over
// one batch): the same schedule stays near the BF16 cache's run, within the bound of
// gpu_fp8_kv_cache_test (e4m3's 2^-4 rounding against bf16's 2^-8).
TEST(GpuMixedStep, TinyQwen3Fp8CacheStaysNearTheBf16One) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto files = open_files("tiny_qwen3");
  ASSERT_NE(files, nullptr);
  auto bf16 = open_cuda(files, ScalarType::kBF16);
  auto fp8 = open_cuda(files, ScalarType::kBF16, kernels::KvCacheStorage::kFp8E4M3);
  ASSERT_NE(bf16, nullptr);
  ASSERT_NE(fp8, nullptr);
  run_schedule(*bf16, *fp8, /*exact=*/false, 0.125, "tiny_qwen3 fp8 cache");
}

}  // namespace
}  // namespace pagoda
