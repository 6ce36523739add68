// Tiny random Hugging Face checkpoints (tests/golden/forward/make_tiny_hf_models.py) against
// transformers' fp32 logits: F32 Llama with llama3 rope scaling and tied embeddings, BF16 Qwen2
// with QKV bias, a Llama split over two safetensors shards, and F32 Qwen3 (per-head q/k norms,
// head_dim 64 from the config with hidden 96, tied embeddings), F32 Mistral whose sliding window
// (12) slides every layer, and F32 Gemma 3.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "sampling/sampling_rows.h"

namespace pagoda::models {
namespace {

const std::string kForwardDir = std::string(PAGODA_TEST_DATA_DIR) + "/forward/";

// HF's own fp32-vs-fp64 gap on these models is ~5e-6 (logits.json "fp32_vs_fp64"); 1e-4 of the
// row's scale leaves room for our different (but still fp32) summation order and nothing more.
constexpr double kRelativeTolerance = 1e-4;

class TinyHfModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyHfModelTest, LogitsAndGreedyMatchTransformers) {
  const std::string dir = kForwardDir + GetParam();
  std::ifstream in(dir + "/logits.json");
  ASSERT_TRUE(in.good())
      << dir << "/logits.json is missing: run tests/golden/forward/make_tiny_hf_models.py";
  const auto golden = nlohmann::json::parse(in);
  auto executor = testing::open_executor(dir, 256);
  ASSERT_NE(executor, nullptr);
  const std::int64_t vocab = executor->info().vocab_size;

  for (const auto& seq : golden["sequences"]) {
    const auto ids = seq["ids"].get<std::vector<std::int32_t>>();
    const auto n = static_cast<std::int32_t>(ids.size());
    SCOPED_TRACE("sequence of " + std::to_string(n) + " tokens");
    testing::SequenceRun run(*executor, 16, n + 16);
    std::vector<std::int32_t> rows(ids.size());
    for (std::int32_t i = 0; i < n; ++i) rows[i] = i;
    const std::vector<float> logits = run.step(ids, rows);  // [n, vocab]

    for (std::int32_t p = 0; p < n; ++p) {
      std::span<const float> row(logits.data() + p * vocab, vocab);
      EXPECT_EQ(sampling::argmax(row), seq["argmax"][p].get<std::int32_t>()) << "position " << p;
      const float max_logit = *std::max_element(row.begin(), row.end());
      const double want_max = seq["max_logit"][p].get<double>();
      EXPECT_NEAR(max_logit, want_max, kRelativeTolerance * std::max(1.0, std::abs(want_max)));
    }
    const auto& last_positions = seq["last_positions"];
    for (std::size_t i = 0; i < last_positions.size(); ++i) {
      const auto p = last_positions[i].get<std::int64_t>();
      const auto want = seq["last_logits"][i].get<std::vector<double>>();
      ASSERT_EQ(static_cast<std::int64_t>(want.size()), vocab);
      double scale = 1.0;
      for (double w : want) scale = std::max(scale, std::abs(w));
      double worst = 0.0;
      for (std::int64_t v = 0; v < vocab; ++v) {
        worst = std::max(worst, std::abs(logits[p * vocab + v] - want[v]));
      }
      EXPECT_LE(worst, kRelativeTolerance * scale) << "position " << p;
      std::printf("%s, %d tokens, position %lld: max |logit diff| = %.3g (scale %.3g)\n",
                  GetParam().c_str(), n, static_cast<long long>(p), worst, scale);
    }
    const auto want_greedy = seq["greedy_ids"].get<std::vector<std::int32_t>>();
    std::vector<float> last(logits.end() - vocab, logits.end());
    EXPECT_EQ(run.greedy(last, static_cast<int>(want_greedy.size())), want_greedy);
  }
}

// Gemma 3's sliding layers on their own KV groups (one layer each beside the one full layer):
// 480 tokens in steps of at most 32 keep each sliding layer's K/V in a ring of 4 blocks of the
// shared pool (single_sequence_batcher.h), where one table for all layers keeps 31; the logits
// are bit for bit those of one table, since every layer reads the same keys in the same order.
TEST(TinyGemma3KvGroupsTest, SlidingRingMatchesOneTable) {
  auto executor = testing::open_executor(kForwardDir + "tiny_gemma3", 64);
  ASSERT_NE(executor, nullptr);
  ASSERT_EQ(executor->info().kv_group_windows, (std::vector<std::int64_t>{0, 12, 12}));
  constexpr std::int64_t kLen = 480;
  constexpr std::int64_t kChunk = 32;
  std::vector<std::int32_t> ids(kLen);
  for (std::int64_t i = 0; i < kLen; ++i) ids[i] = static_cast<std::int32_t>((i * 37 + 11) % 416);
  std::vector<std::vector<float>> grouped, single;
  {
    testing::SequenceRun run(*executor, 16, kLen + 8, kChunk);
    EXPECT_EQ(run.ring_blocks(), (std::vector<std::int64_t>{4, 4}));
    grouped.push_back(run.prefill(ids, kChunk));
    std::vector<float> last = grouped.back();
    for (int i = 0; i < 8; ++i) {
      const std::int32_t token = sampling::argmax(last);
      grouped.push_back(last = run.step(std::span(&token, 1)));
    }
  }
  {
    testing::SequenceRun run(*executor, 16, kLen + 8, kChunk, /*kv_groups=*/false);
    single.push_back(run.prefill(ids, kChunk));
    std::vector<float> last = single.back();
    for (int i = 0; i < 8; ++i) {
      const std::int32_t token = sampling::argmax(last);
      single.push_back(last = run.step(std::span(&token, 1)));
    }
  }
  EXPECT_EQ(grouped, single);
}

// `pagoda generate`'s path (generate_command.cc): SingleSequenceBatcher::for_model sizes one
// sequence's pool, the prompt runs in chunks, the executor samples each token (greedy). With KV
// groups the sliding layers keep a ring of their window's blocks; the tokens are those of one
// table for every layer (--disable-hybrid-kv-cache-manager), in a fraction of the memory.
TEST(TinyGemma3KvGroupsTest, GeneratePathKeepsTheTokensInLessMemory) {
  constexpr std::int64_t kChunk = 64;
  auto executor = testing::open_executor(kForwardDir + "tiny_gemma3", kChunk);
  ASSERT_NE(executor, nullptr);
  constexpr std::int64_t kPrompt = 300;
  constexpr std::int64_t kMaxTokens = 24;
  std::vector<std::int32_t> prompt(kPrompt);
  for (std::int64_t i = 0; i < kPrompt; ++i)
    prompt[i] = static_cast<std::int32_t>((i * 53 + 7) % 416);
  SamplingParams greedy;
  greedy.temperature = 0.0;
  const auto generate = [&](bool single_table, std::int64_t& layer_blocks) {
    auto batcher = SingleSequenceBatcher::for_model(executor->info(), 16, kPrompt + kMaxTokens,
                                                    kChunk, single_table);
    layer_blocks = batcher.num_layer_blocks(executor->info());
    EXPECT_TRUE(batcher.allocate(*executor).ok());
    EXPECT_TRUE(
        executor->open_sampling_slot(0, sampling::slot_sampling_config(greedy, prompt, {})).ok());
    SamplingBatch sampling;
    sampling.rows.push_back(sampling::sampling_row(greedy, 0, 1, -1));
    ForwardBatch batch;
    StepOutput out;
    std::vector<float> logits(static_cast<std::size_t>(executor->info().vocab_size));
    for (std::int64_t begin = 0; begin < kPrompt; begin += kChunk) {
      const std::int64_t n = std::min(kChunk, kPrompt - begin);
      EXPECT_TRUE(batcher.next(std::span(prompt).subspan(begin, n), batch).ok());
      EXPECT_TRUE((begin + n < kPrompt ? executor->forward(batch, logits.data())
                                       : executor->execute(batch, sampling, out))
                      .ok());
    }
    std::vector<std::int32_t> tokens;
    while (true) {
      tokens.push_back(out.token_ids[0]);
      sampling.rows[0].position = std::ssize(tokens);
      if (std::ssize(tokens) == kMaxTokens) break;
      EXPECT_TRUE(batcher.next(std::span(&tokens.back(), 1), batch).ok());
      EXPECT_TRUE(executor->execute(batch, sampling, out).ok());
    }
    executor->close_sampling_slot(0);
    return tokens;
  };
  std::int64_t grouped_blocks = 0, single_blocks = 0;
  const std::vector<std::int32_t> grouped = generate(/*single_table=*/false, grouped_blocks);
  const std::vector<std::int32_t> single = generate(/*single_table=*/true, single_blocks);
  EXPECT_EQ(grouped, single);
  // 324 tokens in blocks of 16: 21 blocks. One table: 21 blocks x 3 layers. Groups of one
  // layer: 21 for the full layer, a ring of (64 + 12 - 1) / 16 + 1 = 6 per sliding layer.
  EXPECT_EQ(single_blocks, 21 * 3);
  EXPECT_EQ(grouped_blocks, 21 + 2 * 6);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, TinyHfModelTest,
                         ::testing::Values("tiny_llama", "tiny_qwen2", "tiny_llama_sharded",
                                           "tiny_qwen3", "tiny_mistral", "tiny_gemma3"));

}  // namespace
}  // namespace pagoda::models
