// Speculative decoding on the CUDA executor, through open_engine as `serve` runs it: greedy
// outputs with n-gram and with draft-model speculation (the model as its own draft) must be the
// tokens the same engine gives without speculation, one prompt at a time and as a batch. The
// verifier compares the target's raw logits on the host, so in fp32 a step's argmax can only
// differ from the plain decode's at a near tie far below what these prompts have; bf16 would
// move logits by ~1e-2 between the decode and the multi-token verification kernels, which is why
// the comparison runs in fp32. Also: the draft model's weights, graphs and KV pool come off the
// target's GPU budget (model_engine.h).
//
// Models: the default SmolLM2 GGUF (PAGODA_SMOLLM2_GGUF, since the GPU machine runs the binary
// away from the source tree, else the build's source path), and the tiny random Qwen3 and
// Gemma 3 checkpoints of tests/data/forward (PAGODA_TEST_DATA), which travel with the tree: the
// tiny ones have no tokenizer of their own and take SmolLM2's (ids past their vocabulary are
// never sampled) and random-id prompts; Gemma 3's sliding layers verify drafts through windowed
// attention. Without a GPU, or without the model, every test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "engine/model_engine.h"
#include "pagoda/tokenizer.h"
#include "tests/gpu/gpu_test_util.h"
#include "tokenizer/model_tokenizer.h"

namespace pagoda::engine {
namespace {

const std::string kModelPath = gpu_test::smollm2_gguf_path();

std::string test_data_dir() {
  return gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR);
}

// A model the identity tests run on.
struct Subject {
  std::string name;
  std::string model_path;
  bool has_tokenizer = true;  // else SmolLM2's tokenizer.json, and only random-id prompts
  double min_ngram_acceptance = 0.0;
};

// gtest prints a parameter in the test's listing: the model's name, not the struct's bytes.
void PrintTo(const Subject& subject, std::ostream* out) {
  *out << subject.name;
}

std::vector<Subject> subjects() {
  const std::string forward = test_data_dir() + "/forward/";
  std::vector<Subject> all = {{"smollm2", kModelPath, true, 0.3},
                              // A random model does not copy its prompt: n-gram drafts are rarely
                              // right, so only the identity is asked of them.
                              {"tiny_qwen3", forward + "tiny_qwen3", false, 0.0},
                              {"tiny_gemma3", forward + "tiny_gemma3", false, 0.0}};
  // The CPU emulation takes minutes per test on the default model's 30 layers: the tiny ones
  // there.
  if (gpu_test::kEmulated) all.erase(all.begin());
  return all;
}

const char* const kPassages[] = {
    "The library kept its rare maps in a cool room on the third floor. Visitors had to wear "
    "cotton gloves, sign a register and leave their bags at the desk.",
    "A good laboratory notebook records what was done, not what was meant to be done. Each "
    "entry has a date, the names of the people present and the exact quantities used.",
    "The train left the valley at dawn, climbed through pine forest for an hour and came out "
    "above the clouds, where the snow fields shone under a clear sky.",
};

struct Result {
  std::vector<std::int32_t> tokens;
  std::int64_t num_completion_tokens = 0;
};

// Engines over one model: with and without speculation.
class SpeculativeEngines {
 public:
  explicit SpeculativeEngines(Subject subject) : subject_(std::move(subject)) {}

  spec::SpeculativeConfig ngram() const {
    spec::SpeculativeConfig c;
    c.method = spec::SpeculativeMethod::kNgram;
    c.num_speculative_tokens = 4;
    c.prompt_lookup_min = 2;
    c.prompt_lookup_max = 4;
    return c;
  }

  spec::SpeculativeConfig draft() const {
    spec::SpeculativeConfig c;
    c.method = spec::SpeculativeMethod::kDraftModel;
    c.model = subject_.model_path;
    c.num_speculative_tokens = 3;
    return c;
  }

  EngineOptions options(std::optional<spec::SpeculativeConfig> speculative) const {
    EngineOptions o;
    o.model_path = subject_.model_path;
    if (!subject_.has_tokenizer) o.tokenizer = smollm2_tokenizer();
    o.executor.device = Device::kCuda;
    o.executor.dtype = cuda::ScalarType::kF32;
    o.executor.gpu_memory_utilization = 0.5;
    o.engine.scheduler.max_model_len = subject_.has_tokenizer ? 512 : 256;
    o.engine.scheduler.max_num_seqs = 8;
    o.engine.scheduler.max_num_batched_tokens = 512;
    o.engine.speculative = std::move(speculative);
    return o;
  }

  std::unique_ptr<EngineClient> open(std::optional<spec::SpeculativeConfig> speculative) const {
    EngineOptions o = options(std::move(speculative));
    o.engine.kv_cache_memory_bytes = std::int64_t{64} << 20;
    auto client = open_engine(std::move(o));
    EXPECT_TRUE(client.ok()) << client.status().to_string();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // With a tokenizer: SmolLM2's ChatML asking to repeat a passage (the answer copies its input:
  // n-grams hit). Always: random-id prompts that repeat a phrase, within the smallest vocabulary.
  std::vector<std::vector<std::int32_t>> prompts() const {
    std::vector<std::vector<std::int32_t>> out;
    if (subject_.has_tokenizer) {
      auto files = open_model_files(subject_.model_path);
      EXPECT_TRUE(files.ok()) << files.status().to_string();
      if (!files.ok()) return out;
      auto tokenizer = load_model_tokenizer(*files);
      EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
      if (!tokenizer.ok()) return out;
      for (const char* passage : kPassages) {
        out.push_back(
            (*tokenizer)
                ->encode(std::string("<|im_start|>user\nRepeat the following text exactly:\n\n") +
                             passage + "<|im_end|>\n<|im_start|>assistant\n",
                         {.add_special_tokens = false, .parse_special = true}));
      }
    }
    const std::int32_t first = subject_.has_tokenizer ? 1000 : 3;
    const std::int32_t span = subject_.has_tokenizer ? 20000 : 300;
    for (int seed = 0; seed < 2; ++seed) {
      std::vector<std::int32_t> phrase;
      for (int i = 0; i < 9 + seed; ++i)
        phrase.push_back(first + (seed * 7919 + i * 104729) % span);
      std::vector<std::int32_t> p;
      while (p.size() < 60) p.push_back(phrase[p.size() % phrase.size()]);
      out.push_back(std::move(p));
    }
    return out;
  }

  static EngineRequest greedy(std::vector<std::int32_t> prompt) {
    EngineRequest r;
    r.prompt_token_ids = std::move(prompt);
    r.max_tokens = 40;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0;
    return r;
  }

  static Result drain(OutputStream& stream) {
    Result result;
    while (true) {
      auto item = stream.next(std::chrono::seconds(120));
      if (!item.ok()) break;
      EXPECT_TRUE(item->error.ok()) << item->error.to_string();
      const RequestOutput& out = item->output;
      result.tokens.insert(result.tokens.end(), out.token_ids.begin(), out.token_ids.end());
      if (out.finished) result.num_completion_tokens = out.usage.num_completion_tokens;
    }
    return result;
  }

  // Every prompt alone, then all of them as one batch.
  static std::vector<Result> run(EngineClient& client,
                                 const std::vector<std::vector<std::int32_t>>& work) {
    std::vector<Result> results;
    for (const auto& p : work) {
      auto stream = client.submit(greedy(p));
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (stream.ok()) results.push_back(drain(**stream));
    }
    std::vector<std::shared_ptr<OutputStream>> streams;
    for (const auto& p : work) {
      auto stream = client.submit(greedy(p));
      EXPECT_TRUE(stream.ok()) << stream.status().to_string();
      if (stream.ok()) streams.push_back(*stream);
    }
    for (auto& s : streams) results.push_back(drain(*s));
    return results;
  }

  void expect_same_as_plain(const spec::SpeculativeConfig& config, double min_acceptance) const {
    const auto work = prompts();
    ASSERT_FALSE(work.empty());
    std::vector<Result> plain;
    {
      auto client = open(std::nullopt);
      ASSERT_NE(client, nullptr);
      plain = run(*client, work);
    }
    auto client = open(config);
    ASSERT_NE(client, nullptr);
    const std::vector<Result> spec = run(*client, work);
    ASSERT_EQ(spec.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(plain[i].tokens.size(), 40u) << "request " << i;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(spec[i].num_completion_tokens, plain[i].num_completion_tokens);
    }
    const SpecDecodeStats stats = client->stats().spec_decode;
    EXPECT_GT(stats.num_drafts, 0);
    ASSERT_GT(stats.num_draft_tokens, 0);
    const double acceptance = static_cast<double>(stats.num_accepted_tokens) /
                              static_cast<double>(stats.num_draft_tokens);
    EXPECT_GE(acceptance, min_acceptance)
        << stats.num_accepted_tokens << " of " << stats.num_draft_tokens << " drafts accepted";
  }

 private:
  static std::shared_ptr<const Tokenizer> smollm2_tokenizer() {
    const std::string dir = test_data_dir() + "/tokenizer/smollm2";
    auto loaded = load_tokenizer_json(dir + "/tokenizer.json", dir + "/tokenizer_config.json");
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    return loaded.ok() ? std::shared_ptr<const Tokenizer>(std::move(*loaded)) : nullptr;
  }

  Subject subject_;
};

class SpeculativeGpuIdentity : public ::testing::TestWithParam<Subject> {
 protected:
  void SetUp() override {
    PAGODA_SKIP_WITHOUT_GPU();
    if (!std::filesystem::exists(GetParam().model_path)) {
      GTEST_SKIP() << GetParam().model_path << " is absent";
    }
  }
};

TEST_P(SpeculativeGpuIdentity, NgramGreedyMatchesPlainDecoding) {
  // Repeating a passage: most of the real model's n-gram drafts are right.
  const SpeculativeEngines engines(GetParam());
  engines.expect_same_as_plain(engines.ngram(), GetParam().min_ngram_acceptance);
}

TEST_P(SpeculativeGpuIdentity, DraftModelGreedyMatchesPlainDecoding) {
  // The model drafting for itself in fp32 agrees with itself almost always.
  const SpeculativeEngines engines(GetParam());
  engines.expect_same_as_plain(engines.draft(), 0.9);
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeGpuIdentity, ::testing::ValuesIn(subjects()),
                         [](const auto& info) { return info.param.name; });

// The budget and start-up tests on the default model, on a GPU: the emulation's device is too
// small beside its weights for the budget's proportions, and its start-up takes a minute there.
#if !defined(PAGODA_CUDA_EMULATION)
class SpeculativeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PAGODA_SKIP_WITHOUT_GPU();
    if (!std::filesystem::exists(kModelPath)) {
      GTEST_SKIP() << kModelPath << " is absent (set PAGODA_SMOLLM2_GGUF)";
    }
  }
  const SpeculativeEngines engines_{subjects().front()};
  spec::SpeculativeConfig draft() const { return engines_.draft(); }
  EngineOptions options(std::optional<spec::SpeculativeConfig> speculative) const {
    return engines_.options(std::move(speculative));
  }
};

// The draft's weights load before the target's profiling pass and its pool (as many blocks as
// the target's) comes off the same budget, so the target gets fewer blocks than alone.
TEST_F(SpeculativeGpuTest, DraftModelSharesTheGpuBudget) {
  std::int64_t alone = 0;
  {
    auto client = open_engine(options(std::nullopt));
    ASSERT_TRUE(client.ok()) << client.status().to_string();
    alone = (*client)->config().cache.num_blocks;
  }
  auto client = open_engine(options(draft()));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  const std::int64_t shared = (*client)->config().cache.num_blocks;
  EXPECT_GT(shared, 0);
  // Same model as its own draft: each block costs twice, so about half the blocks.
  EXPECT_LT(shared, alone * 6 / 10) << "alone " << alone << ", with the draft " << shared;
  EXPECT_GT(shared, alone * 4 / 10) << "alone " << alone << ", with the draft " << shared;
}

TEST_F(SpeculativeGpuTest, StartupReportCountsTheDraftAndTheGraphs) {
  EngineOptions o = options(draft());
  o.engine.kv_cache_memory_bytes = std::int64_t{64} << 20;
  StartupReport startup;
  o.startup = &startup;
  auto client = open_engine(std::move(o));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  std::vector<std::string> phases;
  for (const auto& [phase, seconds] : startup.phases) phases.push_back(phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"tokenizer", "weights", "draft weights", "kv profile",
                                              "kv cache + cuda graphs"}));
  ASSERT_TRUE(startup.graphs.has_value());
  EXPECT_GT(startup.graphs->count, 0);
  EXPECT_EQ(startup.graphs->max_num_seqs, 8);
}

#endif  // !defined(PAGODA_CUDA_EMULATION)

}  // namespace
}  // namespace pagoda::engine
