// Speculative decoding over the real default model (SmolLM2-135M Q4_1): with greedy sampling the
// tokens, text, finish reason and usage are those of plain decoding, for both proposers, alone
// and in a batch of different-length requests, with max_tokens and stop strings landing inside
// accepted drafts; with sampling, the token frequencies match plain decoding's (a chi-square
// test over seeded draws). The model drafts for itself in the draft-model tests, so greedy
// acceptance must be near total.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <thread>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/paged_attention.h"
#include "engine/model_engine.h"
#include "model/model_files.h"
#include "models/cpu_model_executor.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda::engine {
namespace {

const std::string kModelPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Result {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::string finish_reason;
  std::int64_t num_completion_tokens = 0;
};

class EngineSpeculativeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) {
      GTEST_SKIP() << kModelPath << " is absent: run scripts/setup.sh to fetch the default model";
    }
  }

  static spec::SpeculativeConfig ngram(std::int64_t k = 4) {
    spec::SpeculativeConfig c;
    c.method = spec::SpeculativeMethod::kNgram;
    c.num_speculative_tokens = k;
    c.prompt_lookup_min = 2;
    c.prompt_lookup_max = 4;
    return c;
  }

  static spec::SpeculativeConfig draft(std::int64_t k = 3) {
    spec::SpeculativeConfig c;
    c.method = spec::SpeculativeMethod::kDraftModel;
    c.model = kModelPath;
    c.num_speculative_tokens = k;
    return c;
  }

  static std::unique_ptr<EngineClient> open(std::optional<spec::SpeculativeConfig> speculative,
                                            std::int64_t num_blocks = 0) {
    EngineOptions options;
    options.model_path = kModelPath;
    options.executor.num_threads = 2;
    options.engine.scheduler.max_model_len = 256;
    options.engine.scheduler.max_num_batched_tokens = 256;
    options.engine.cache.num_blocks = num_blocks;
    if (num_blocks == 0) options.engine.kv_cache_memory_bytes = std::int64_t{64} << 20;
    options.engine.speculative = std::move(speculative);
    auto client = open_engine(options);
    EXPECT_TRUE(client.ok()) << client.status().to_string();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // SmolLM2's ChatML asking to repeat `passage`: the answer copies its input, as in the
  // grounded tasks n-gram speculation is for.
  static std::vector<std::int32_t> repeat_prompt(const std::string& passage) {
    static const std::unique_ptr<Tokenizer> tokenizer = [] {
      auto files = open_model_files(kModelPath);
      EXPECT_TRUE(files.ok()) << files.status().to_string();
      auto loaded = load_tokenizer_from_gguf(*files->gguf);
      EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
      return std::move(*loaded);
    }();
    return tokenizer->encode("<|im_start|>user\nRepeat the following text exactly:\n\n" + passage +
                                 "<|im_end|>\n<|im_start|>assistant\n",
                             {.add_special_tokens = false, .parse_special = true});
  }

  // A prompt that repeats a phrase of random tokens: the continuation copies it, n-grams hit.
  static std::vector<std::int32_t> repetitive_prompt(int seed, int len) {
    std::vector<std::int32_t> phrase;
    for (int i = 0; i < 9 + seed % 5; ++i)
      phrase.push_back(1000 + (seed * 7919 + i * 104729) % 20000);
    std::vector<std::int32_t> p;
    while (static_cast<int>(p.size()) < len) p.push_back(phrase[p.size() % phrase.size()]);
    return p;
  }

  static EngineRequest greedy(std::vector<std::int32_t> prompt, std::int64_t max_tokens) {
    EngineRequest r;
    r.prompt_token_ids = std::move(prompt);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0;
    return r;
  }

  static std::shared_ptr<OutputStream> submit(EngineClient& client, EngineRequest r) {
    auto s = client.submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? *s : nullptr;
  }

  static Result drain(OutputStream& stream) {
    Result result;
    while (true) {
      auto item = stream.next(std::chrono::seconds(60));
      if (!item.ok()) break;
      const RequestOutput& out = item->output;
      result.tokens.insert(result.tokens.end(), out.token_ids.begin(), out.token_ids.end());
      result.text += out.text;
      if (out.finished) {
        result.finish_reason = std::string(out.finish_reason());
        result.num_completion_tokens = out.usage.num_completion_tokens;
      }
    }
    EXPECT_FALSE(result.finish_reason.empty());
    return result;
  }

  static std::vector<Result> run_all(EngineClient& client, std::vector<EngineRequest> requests) {
    std::vector<std::shared_ptr<OutputStream>> streams;
    for (EngineRequest& r : requests) streams.push_back(submit(client, std::move(r)));
    std::vector<Result> results;
    for (auto& s : streams) results.push_back(drain(*s));
    return results;
  }

  static EngineStats settled(const EngineClient& client) {
    for (int i = 0; i < 400 && client.stats().kv_cache_usage > 0.0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return client.stats();
  }

  static void expect_same(const std::vector<Result>& plain, const std::vector<Result>& spec) {
    ASSERT_EQ(plain.size(), spec.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(spec[i].tokens, plain[i].tokens) << "request " << i;
      EXPECT_EQ(spec[i].text, plain[i].text) << "request " << i;
      EXPECT_EQ(spec[i].finish_reason, plain[i].finish_reason) << "request " << i;
      EXPECT_EQ(spec[i].num_completion_tokens, plain[i].num_completion_tokens) << "request " << i;
    }
  }

  // Different prompt lengths and max_tokens (several end inside a verified run of drafts):
  // random-token phrases and real text, so drafts are both accepted and rejected.
  static std::vector<EngineRequest> batch() {
    std::vector<EngineRequest> requests;
    for (int i = 0; i < 4; ++i) {
      requests.push_back(greedy(repetitive_prompt(i, 20 + 13 * i), 9 + 5 * i));
    }
    requests.push_back(greedy(repeat_prompt(kPassage), 37));
    requests.push_back(greedy(repeat_prompt("Seven green frogs sat on a log by the pond."), 23));
    return requests;
  }

  static constexpr const char* kPassage =
      "The library kept its rare maps in a cool room on the third floor. Visitors had to wear "
      "cotton gloves, sign a register and leave their bags at the desk.";
};

TEST_F(EngineSpeculativeTest, NgramGreedyIsPlainDecodingAloneAndInABatch) {
  auto plain = open(std::nullopt);
  auto spec = open(ngram());
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  expect_same(run_all(*plain, {greedy(repetitive_prompt(7, 40), 40)}),
              run_all(*spec, {greedy(repetitive_prompt(7, 40), 40)}));
  expect_same(run_all(*plain, batch()), run_all(*spec, batch()));
  const EngineStats stats = settled(*spec);
  EXPECT_EQ(stats.kv_cache_usage, 0.0);  // rolled-back lookahead blocks were freed
  EXPECT_GT(stats.spec_decode.num_drafts, 10);
  EXPECT_GT(stats.spec_decode.num_accepted_tokens, stats.spec_decode.num_draft_tokens / 2);
  EXPECT_EQ(settled(*plain).spec_decode.num_drafts, 0);
}

TEST_F(EngineSpeculativeTest, NgramStopStringsAndMaxTokensStopWherePlainDecodingStops) {
  auto plain = open(std::nullopt);
  auto spec = open(ngram());
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  const Result reference = run_all(*plain, {greedy(repeat_prompt(kPassage), 40)})[0];
  ASSERT_GT(reference.text.size(), 60u) << reference.text;
  std::vector<EngineRequest> requests;
  for (std::size_t cut : {9u, 26u, 47u}) {
    EngineRequest r = greedy(repeat_prompt(kPassage), 40);
    r.stop = {reference.text.substr(cut, 4)};
    requests.push_back(std::move(r));
  }
  for (std::int64_t max_tokens : {2, 5, 7, 11}) {
    requests.push_back(greedy(repeat_prompt(kPassage), max_tokens));
  }
  std::vector<EngineRequest> copy = requests;
  const std::vector<Result> expected = run_all(*plain, std::move(requests));
  EXPECT_EQ(expected[0].finish_reason, "stop");
  expect_same(expected, run_all(*spec, std::move(copy)));
  EXPECT_GT(settled(*spec).spec_decode.num_accepted_tokens, 0);
}

TEST_F(EngineSpeculativeTest, DraftModelGreedyIsPlainDecodingWithNearTotalAcceptance) {
  auto plain = open(std::nullopt);
  auto spec = open(draft());
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  std::vector<EngineRequest> requests = batch();
  requests.resize(4);
  std::vector<EngineRequest> copy = requests;
  expect_same(run_all(*plain, std::move(requests)), run_all(*spec, std::move(copy)));
  const SpecDecodeStats s = settled(*spec).spec_decode;
  EXPECT_GT(s.num_draft_tokens, 20);
  EXPECT_GE(s.num_accepted_tokens * 10, s.num_draft_tokens * 9);  // the model drafts for itself
}

TEST_F(EngineSpeculativeTest, DraftModelWithAnotherVocabularyIsRefused) {
  spec::SpeculativeConfig c = draft();
  c.model = std::string(PAGODA_SOURCE_DIR) + "/models/absent-draft.gguf";
  EngineOptions options;
  options.model_path = kModelPath;
  options.engine.scheduler.max_model_len = 256;
  options.engine.kv_cache_memory_bytes = std::int64_t{64} << 20;
  options.engine.speculative = c;
  EXPECT_FALSE(open_engine(options).ok());
}

// Counts of the second output token over seeded draws: the first has no draft behind it, the
// second is verified (max_tokens 3 leaves room for one draft).
std::map<std::int32_t, std::int64_t> second_token_counts(EngineClient& client,
                                                         const std::vector<std::int32_t>& prompt,
                                                         int num_draws) {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < num_draws; ++i) {
    EngineRequest r;
    r.prompt_token_ids = prompt;
    r.max_tokens = 3;
    r.ignore_eos = true;
    // Flattened so that drafts are rejected often and several tokens share the mass.
    r.sampling.temperature = 2.0;
    r.sampling.top_k = 6;
    r.sampling.seed = 1000 + i;
    requests.push_back(std::move(r));
  }
  std::vector<std::shared_ptr<OutputStream>> streams;
  for (EngineRequest& r : requests) streams.push_back(client.submit(std::move(r)).value());
  std::map<std::int32_t, std::int64_t> counts;
  for (auto& s : streams) {
    std::vector<std::int32_t> tokens;
    while (true) {
      auto item = s->next(std::chrono::seconds(60));
      if (!item.ok()) break;
      tokens.insert(tokens.end(), item->output.token_ids.begin(), item->output.token_ids.end());
    }
    if (tokens.size() == 3) ++counts[tokens[1]];
  }
  return counts;
}

// Two-sample chi-square over categories with enough mass (the rest pooled); true when the
// statistic is below the 0.999 quantile (Wilson-Hilferty approximation), i.e. no evidence at
// the 0.1% level that the two samples come from different distributions.
bool same_distribution(const std::map<std::int32_t, std::int64_t>& a,
                       const std::map<std::int32_t, std::int64_t>& b, double* statistic) {
  std::map<std::int32_t, std::pair<double, double>> cells;
  for (const auto& [t, n] : a) cells[t].first += static_cast<double>(n);
  for (const auto& [t, n] : b) cells[t].second += static_cast<double>(n);
  double na = 0, nb = 0;
  for (const auto& [t, c] : cells) {
    na += c.first;
    nb += c.second;
  }
  std::vector<std::pair<double, double>> kept;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [t, c] : cells) {
    if (c.first + c.second >= 10)
      kept.push_back(c);
    else {
      pooled.first += c.first;
      pooled.second += c.second;
    }
  }
  if (pooled.first + pooled.second > 0) kept.push_back(pooled);
  double chi2 = 0;
  for (const auto& [x, y] : kept) {
    const double total = x + y;
    const double ex = total * na / (na + nb), ey = total * nb / (na + nb);
    chi2 += (x - ex) * (x - ex) / ex + (y - ey) * (y - ey) / ey;
  }
  const double dof = static_cast<double>(kept.size()) - 1;
  const double z = 3.090;  // 0.999 quantile of the standard normal
  const double h = 2.0 / (9.0 * dof);
  const double critical = dof * std::pow(1 - h + z * std::sqrt(h), 3);
  *statistic = chi2;
  return chi2 < critical && kept.size() >= 3;
}

TEST_F(EngineSpeculativeTest, SampledTokensFollowTheTargetDistribution) {
  constexpr int kDraws = 100;
  // Padded to one token past a block boundary: the prefix cache serves all but the last token,
  // so each draw costs a few token rows (the draft model still reads the whole prompt).
  std::vector<std::int32_t> prompt = repeat_prompt("Seven green frogs sat on a log.");
  while (prompt.size() % 16 != 1) prompt.insert(prompt.begin(), prompt.front());
  auto plain = open(std::nullopt);
  ASSERT_NE(plain, nullptr);
  const auto expected = second_token_counts(*plain, prompt, kDraws);
  plain.reset();
  spec::SpeculativeConfig lookup = ngram(2);
  lookup.prompt_lookup_min = 1;  // any first token seen in the prompt gets a draft
  for (spec::SpeculativeConfig config : {lookup, draft(2)}) {
    config.disable_by_batch_size = kDraws;  // all draws decode at once
    auto spec = open(config);
    ASSERT_NE(spec, nullptr);
    const auto got = second_token_counts(*spec, prompt, kDraws);
    double chi2 = 0;
    EXPECT_TRUE(same_distribution(expected, got, &chi2))
        << spec::speculative_method_name(config.method) << ": chi-square " << chi2;
    const SpecDecodeStats s = settled(*spec).spec_decode;
    // The n-gram proposer drafts only after a first token the prompt holds: 21% of first draws
    // here (20,000 draws measured), so ~21 of 100; kDraws / 8 leaves two standard deviations.
    EXPECT_GT(s.num_drafts, kDraws / 8) << spec::speculative_method_name(config.method);
  }
}

// How exact greedy verification is on the CPU backend. With int16 activations (the default
// wherever the CPU has AVX2, cpu_int16_activations()) every matmul gives a row the same bits
// whatever rows share it (matmul_int16_avx512.h), and attention keeps every pass shorter than
// cpu::kPrefillMinQueries -- every verification pass -- on the decode tile: a token scored in a
// verification pass gets its one-token-decode logits bit for bit, so greedy speculation is plain
// decoding. With fp32 activations (PAGODA_CPU_INT16=0) only passes of 1-3 rows do: the matmul
// picks its kernel by row count (direct, row-group, packed) and the classes round differently,
// measured up to ~5e-5 on logits of magnitude ~35, so greedy speculation reproduces plain
// decoding unless two top logits lie within ~1e-4 (when plain decoding already depends on how
// many requests share the step). Longer passes, which no verification makes, also run the
// prefill attention tile, which rounds differently from the decode tile; with int16
// activations such a last-bit difference can move an activation across an int16 rounding step,
// and the layers after carry it: 2.8e-3 measured on the 70-row pass. docs/perf/speculative.md
// has this.
static_assert(cpu::kPrefillMinQueries > spec::SpeculativeConfig::kMaxSpeculativeTokens + 1,
              "a verification pass must stay on the decode attention tile");
TEST_F(EngineSpeculativeTest, VerificationRowsMatchOneTokenDecode) {
  auto files = open_model_files(kModelPath);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  auto executor = models::CpuModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.num_threads = 2, .max_num_batched_tokens = 128, .max_model_len = 256});
  ASSERT_TRUE(executor.ok()) << executor.status().to_string();
  ModelExecutor& model = **executor;
  constexpr std::int64_t kBlock = 16;
  ASSERT_TRUE(model.allocate_kv_cache(16, kBlock).ok());
  const std::int64_t vocab = model.info().vocab_size;
  const std::vector<std::int32_t> prompt = repeat_prompt(kPassage);
  const auto n = static_cast<std::int64_t>(prompt.size());
  // One sequence in blocks 0..15; `tokens` at positions start.., logits for every row.
  const auto run = [&](const std::vector<std::int32_t>& tokens, std::int64_t start) {
    ForwardBatch b;
    b.query_start_loc = {0, static_cast<std::int32_t>(tokens.size())};
    b.seq_lens = {static_cast<std::int32_t>(start + std::ssize(tokens))};
    b.max_blocks_per_seq = 16;
    for (std::int32_t blk = 0; blk < 16; ++blk) b.block_tables.push_back(blk);
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      b.token_ids.push_back(tokens[t]);
      b.positions.push_back(static_cast<std::int32_t>(start + static_cast<std::int64_t>(t)));
      b.slot_mapping.push_back(start + static_cast<std::int64_t>(t));
      b.logits_indices.push_back(static_cast<std::int32_t>(t));
    }
    std::vector<float> logits(tokens.size() * static_cast<std::size_t>(vocab));
    EXPECT_TRUE(model.forward(b, logits.data()).ok());
    return logits;
  };
  // The prompt minus its last token, then that token alone: the reference decode.
  run(std::vector<std::int32_t>(prompt.begin(), prompt.end() - 1), 0);
  const std::vector<float> alone = run({prompt.back()}, n - 1);
  // The same token leading passes of 2, 3, 5, 9 and 17 rows (verification passes: direct and
  // row-group kernels with fp32 activations) and 70 (packed kernel, prefill attention tile), the
  // other rows being the passage's own tokens.
  const auto argmax = [vocab](const std::vector<float>& logits) {
    return std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin();
  };
  for (const std::int64_t rows : {2, 3, 5, 9, 17, 70}) {
    std::vector<std::int32_t> tokens = {prompt.back()};
    for (std::int64_t r = 1; r < rows; ++r)
      tokens.push_back(prompt[static_cast<std::size_t>(r % n)]);
    const std::vector<float> pass = run(tokens, n - 1);
    std::int64_t differing = 0;
    double max_diff = 0.0;
    for (std::int64_t v = 0; v < vocab; ++v) {
      const float a = alone[static_cast<std::size_t>(v)];
      const float p = pass[static_cast<std::size_t>(v)];
      if (p != a) ++differing;
      max_diff = std::max(max_diff, std::abs(double{p} - double{a}));
    }
    const bool exact =
        rows <= 3 || (cpu::cpu_int16_activations() && rows < cpu::kPrefillMinQueries);
    if (exact) {
      EXPECT_EQ(differing, 0) << rows << "-row pass: " << differing << " of " << vocab
                              << " logits differ from the one-token decode";
    } else {
      EXPECT_LE(max_diff, rows < cpu::kPrefillMinQueries ? 1e-3 : 1e-2) << rows << "-row pass";
      EXPECT_EQ(argmax(pass), argmax(alone)) << rows << "-row pass";
    }
  }
}

}  // namespace
}  // namespace pagoda::engine
