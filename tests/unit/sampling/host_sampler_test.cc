// HostSampler, the CPU batched sampler (pagoda/step_sampling.h's rules): its fast path against
// the scalar reference on random rows at awkward sizes, the draw's distribution (chi-square), the
// logits processors against a naive loop, seeded draws that ignore the batch and the threads,
// logprobs, return_logits rows, forced tokens and the slot life cycle. Inputs are fresh each run
// unless PAGODA_TEST_SEED fixes them; every failure prints the seed. PAGODA_CPU_ISA=baseline runs
// the scalar passes instead of the AVX2 ones.
#include "sampling/host_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "sampling/logprobs.h"
#include "sampling/random_draw.h"

namespace pagoda::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::uint64_t test_seed() {
  static const std::uint64_t seed = [] {
    const char* fixed = std::getenv("PAGODA_TEST_SEED");
    if (fixed != nullptr) return static_cast<std::uint64_t>(std::strtoull(fixed, nullptr, 10));
    return (static_cast<std::uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  }();
  return seed;
}

std::string seed_trace() {
  return "rerun with PAGODA_TEST_SEED=" + std::to_string(test_seed());
}

int uniform_int(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

float uniform_real(std::mt19937_64& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

bool coin(std::mt19937_64& rng, double p = 0.5) {
  return std::bernoulli_distribution(p)(rng);
}

// Logits of one of five shapes: normals at three spreads, few distinct levels (ties
// everywhere), or normals with about a third masked to -inf.
std::vector<float> random_logits(std::mt19937_64& rng, std::int64_t vocab) {
  std::vector<float> l(static_cast<std::size_t>(vocab));
  const int shape = uniform_int(rng, 0, 4);
  static constexpr float kSpread[] = {0.5f, 3.0f, 10.0f, 0.0f, 3.0f};
  std::normal_distribution<float> normal(0.0f, shape == 3 ? 1.0f : kSpread[shape]);
  for (float& x : l) {
    x = shape == 3 ? static_cast<float>(uniform_int(rng, 0, 5)) : normal(rng);
    if (shape == 4 && coin(rng, 0.33)) x = -kInf;
  }
  return l;
}

std::vector<std::int32_t> random_tokens(std::mt19937_64& rng, std::int64_t vocab, int n) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  // A narrow range half of the time, so tokens repeat and counts exceed 1.
  const int hi = static_cast<int>(coin(rng) ? std::min<std::int64_t>(vocab, 20) : vocab) - 1;
  for (auto& t : tokens) t = uniform_int(rng, 0, hi);
  return tokens;
}

// Settings with every processor switched on at random values.
SlotSamplingConfig random_config(std::mt19937_64& rng, std::int64_t vocab) {
  SlotSamplingConfig c;
  c.presence_penalty = coin(rng) ? uniform_real(rng, -2.0f, 2.0f) : 0.0f;
  c.frequency_penalty = coin(rng) ? uniform_real(rng, -2.0f, 2.0f) : 0.0f;
  c.repetition_penalty = coin(rng) ? uniform_real(rng, 0.5f, 2.0f) : 1.0f;
  std::set<std::int32_t> bias_ids;
  for (int i = uniform_int(rng, 0, 6); i > 0; --i) {
    bias_ids.insert(uniform_int(rng, 0, static_cast<int>(vocab) - 1));
  }
  for (const std::int32_t id : bias_ids) c.logit_bias.emplace_back(id, uniform_real(rng, -5, 5));
  c.min_tokens = uniform_int(rng, 0, 4);
  c.min_tokens_banned_ids = random_tokens(rng, vocab, uniform_int(rng, 0, 3));
  c.prompt_token_ids = random_tokens(rng, vocab, uniform_int(rng, 0, 40));
  return c;
}

// An allowed mask letting through a random share (about 20-100%) of the tokens.
std::vector<std::uint32_t> random_mask(std::mt19937_64& rng, std::int64_t vocab) {
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(SamplingBatch::mask_words(vocab)), 0);
  const double share = uniform_real(rng, 0.2f, 1.0f);
  for (std::int64_t v = 0; v < vocab; ++v) {
    if (coin(rng, share)) mask[static_cast<std::size_t>(v / 32)] |= 1u << (v % 32);
  }
  return mask;
}

// The kinds of row the rules tell apart: the two greedy ones, then a draw under each subset of
// top-k, top-p and min-p.
constexpr int kNumModes = 10;

std::string mode_name(int mode) {
  if (mode == 0) return "greedy";
  if (mode == 1) return "top_k=1";
  const int cut = mode - 2;
  std::string name = "temperature";
  if (cut & 1) name += "+top_k";
  if (cut & 2) name += "+top_p";
  if (cut & 4) name += "+min_p";
  return name;
}

SamplingRow random_row(std::mt19937_64& rng, std::int64_t vocab, int mode) {
  SamplingRow row;
  row.seed = rng();
  row.position = uniform_int(rng, 0, 1 << 20);
  row.temperature = mode == 0 ? 0.0f : uniform_real(rng, 0.3f, 2.0f);
  if (mode == 1) row.top_k = 1;
  const int cut = mode - 2;
  if (mode >= 2) {
    const int big = static_cast<int>(std::max<std::int64_t>(2, vocab / 2));
    if (cut & 1) row.top_k = coin(rng) ? uniform_int(rng, 2, std::min(big, 100)) : big;
    if (cut & 2) row.top_p = uniform_real(rng, 0.05f, 0.99f);
    if (cut & 4)
      row.min_p = coin(rng) ? uniform_real(rng, 0.001f, 0.05f) : uniform_real(rng, 0.05f, 0.8f);
  }
  return row;
}

std::span<const float> row_of(const std::vector<float>& logits, std::size_t i, std::int64_t vocab) {
  return std::span<const float>(logits).subspan(i * static_cast<std::size_t>(vocab),
                                                static_cast<std::size_t>(vocab));
}

// Whether the fast path's `fast` may stand for the reference's `expected`: equal, or a near-tie
// of the race between two kept tokens (the AVX2 log differs from std::log in its last ulps).
::testing::AssertionResult same_or_near_tie(std::span<const float> processed,
                                            const SamplingRow& row, std::int32_t fast,
                                            std::int32_t expected) {
  if (fast == expected) return ::testing::AssertionSuccess();
  const bool drawn = row.forced_token < 0 && row.temperature > 0.0f && row.top_k != 1;
  if (!drawn || fast < 0 || static_cast<std::size_t>(fast) >= processed.size()) {
    return ::testing::AssertionFailure() << "token " << fast << ", reference " << expected;
  }
  const std::vector<bool> kept = kept_tokens_reference(processed, row);
  const std::uint64_t key = draw_key(row.seed, row.position);
  const float scale = 1.0f / row.temperature;
  const auto score = [&](std::int32_t v) {
    return processed[static_cast<std::size_t>(v)] * scale +
           token_gumbel(key, static_cast<std::uint32_t>(v));
  };
  const float gap = std::abs(score(fast) - score(expected));
  if (kept[static_cast<std::size_t>(fast)] && gap <= 1e-5f * (1.0f + std::abs(score(expected)))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "token " << fast << " (kept " << kept[static_cast<std::size_t>(fast)] << "), reference "
         << expected << ", score gap " << gap;
}

TEST(HostSampler, FastPathMatchesReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  cpu::ThreadPool pool(2);
  for (const std::int64_t vocab : {1, 7, 1000, 49153}) {
    SCOPED_TRACE(testing::Message() << "vocab " << vocab);
    const int reps = vocab > 10000 ? 2 : 12;
    HostSampler sampler(vocab);
    SamplingBatch batch;
    std::vector<float> logits;
    for (int mode = 0; mode < kNumModes; ++mode) {
      for (const bool processors : {false, true}) {
        for (int rep = 0; rep < reps; ++rep) {
          SamplingRow row = random_row(rng, vocab, mode);
          row.slot = static_cast<std::int32_t>(batch.rows.size());
          ASSERT_TRUE(sampler
                          .open_slot(row.slot,
                                     processors ? random_config(rng, vocab) : SlotSamplingConfig{})
                          .ok());
          if (processors) {
            sampler.accept_tokens(row.slot, random_tokens(rng, vocab, uniform_int(rng, 0, 30)));
            row.position = uniform_int(rng, 0, 6);
            if (coin(rng)) {
              row.allowed_mask = static_cast<std::int32_t>(batch.allowed_masks.size() /
                                                           SamplingBatch::mask_words(vocab));
              const auto mask = random_mask(rng, vocab);
              batch.allowed_masks.insert(batch.allowed_masks.end(), mask.begin(), mask.end());
            }
          }
          const std::vector<float> l = random_logits(rng, vocab);
          logits.insert(logits.end(), l.begin(), l.end());
          batch.rows.push_back(row);
        }
      }
    }
    // The references first: sample() counts its tokens for the penalties.
    const std::size_t num_rows = batch.rows.size();
    std::vector<float> processed(logits.size());
    std::vector<std::int32_t> expected(num_rows);
    for (std::size_t i = 0; i < num_rows; ++i) {
      const std::span<float> p(processed.data() + i * vocab, static_cast<std::size_t>(vocab));
      sampler.process_row(row_of(logits, i, vocab), batch.rows[i], batch, p);
      expected[i] = pick_token_reference(p, batch.rows[i]);
    }
    StepOutput out;
    sampler.sample(logits, batch, vocab % 2 == 1 ? &pool : nullptr, out);
    ASSERT_EQ(out.token_ids.size(), num_rows);
    for (std::size_t i = 0; i < num_rows; ++i) {
      const int mode = static_cast<int>(i / static_cast<std::size_t>(2 * reps));
      EXPECT_TRUE(same_or_near_tie(row_of(processed, i, vocab), batch.rows[i], out.token_ids[i],
                                   expected[i]))
          << mode_name(mode) << ", row " << i;
    }
  }
}

// Wilson-Hilferty: the chi-square value with `df` degrees of freedom exceeded with probability
// 1e-4 (z = 3.719).
double chi_square_critical(int df) {
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + 3.719 * std::sqrt(a), 3.0);
}

// Draws `row` 100,000 times from the same logits at distinct positions and checks the tokens
// against the renormalized kept distribution of kept_tokens_reference.
void expect_draws_follow_kept_distribution(const std::vector<float>& logits, SamplingRow row) {
  constexpr int kBatch = 1000;
  constexpr int kDraws = 100000;
  const auto vocab = static_cast<std::int64_t>(logits.size());
  HostSampler sampler(vocab);
  SamplingBatch batch;
  std::vector<float> batch_logits;
  for (int r = 0; r < kBatch; ++r) {
    ASSERT_TRUE(sampler.open_slot(r, {}).ok());
    row.slot = r;
    batch.rows.push_back(row);
    batch_logits.insert(batch_logits.end(), logits.begin(), logits.end());
  }
  std::vector<int> counts(logits.size(), 0);
  StepOutput out;
  for (int call = 0; call < kDraws / kBatch; ++call) {
    for (int r = 0; r < kBatch; ++r) batch.rows[r].position = call * kBatch + r;
    sampler.sample(batch_logits, batch, nullptr, out);
    for (const std::int32_t t : out.token_ids) ++counts[static_cast<std::size_t>(t)];
  }

  const std::vector<bool> kept = kept_tokens_reference(logits, row);
  const float scale = 1.0f / row.temperature;
  const float max_s = *std::max_element(logits.begin(), logits.end()) * scale;
  std::vector<double> expected(logits.size(), 0.0);
  double total = 0.0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (kept[v]) total += expected[v] = std::exp(double{logits[v] * scale} - double{max_s});
  }
  // Tokens expected at least 5 times get a bin each, the rest share one.
  double chi2 = 0.0;
  int bins = 0;
  double pooled_expected = 0.0;
  int pooled_count = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) {
    if (!kept[v]) {
      EXPECT_EQ(counts[v], 0) << "token " << v << " is cut off";
      continue;
    }
    const double e = expected[v] / total * kDraws;
    if (e < 5.0) {
      pooled_expected += e;
      pooled_count += counts[v];
      continue;
    }
    chi2 += (counts[v] - e) * (counts[v] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0.0) {
    chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  if (bins < 2) return;  // one outcome: the cut-off check above is the whole test
  EXPECT_LT(chi2, chi_square_critical(bins - 1)) << bins << " bins";
}

TEST(HostSampler, DrawsFollowTheKeptDistribution) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(50);
  for (float& l : logits) l = normal(rng);
  struct Case {
    const char* name;
    float temperature;
    std::int32_t top_k;
    float top_p;
    float min_p;
  };
  for (const Case& c :
       {Case{"temperature", 0.8f, 0, 1.0f, 0.0f}, Case{"top_k", 1.0f, 10, 1.0f, 0.0f},
        Case{"top_p", 1.0f, 0, 0.7f, 0.0f}, Case{"min_p", 1.2f, 0, 1.0f, 0.1f},
        Case{"combined", 0.9f, 20, 0.85f, 0.03f}}) {
    SCOPED_TRACE(c.name);
    SamplingRow row;
    row.seed = rng();
    row.temperature = c.temperature;
    row.top_k = c.top_k;
    row.top_p = c.top_p;
    row.min_p = c.min_p;
    expect_draws_follow_kept_distribution(logits, row);
  }
}

// Stages 1-4 written as plainly as the header states them.
std::vector<float> naive_processing(std::span<const float> raw, const SlotSamplingConfig& c,
                                    const std::vector<std::int32_t>& history,
                                    const SamplingRow& row, const SamplingBatch& batch) {
  const auto vocab = static_cast<std::int64_t>(raw.size());
  std::vector<float> l(raw.begin(), raw.end());
  for (std::int64_t v = 0; v < vocab; ++v) {
    float& x = l[static_cast<std::size_t>(v)];
    if (row.allowed_mask >= 0) {
      const std::uint32_t word =
          batch.allowed_masks[row.allowed_mask * SamplingBatch::mask_words(vocab) + v / 32];
      if ((word >> (v % 32) & 1u) == 0) x = -kInf;
    }
    const auto contains = [v](const std::vector<std::int32_t>& ids) {
      return std::find(ids.begin(), ids.end(), v) != ids.end();
    };
    if (row.position < c.min_tokens && contains(c.min_tokens_banned_ids)) x = -kInf;
    for (const auto& [id, bias] : c.logit_bias) {
      if (id == v) x += bias;
    }
    const auto count = std::count(history.begin(), history.end(), v);
    const float r = c.repetition_penalty;
    if (r != 1.0f && (contains(c.prompt_token_ids) || count > 0)) x = x > 0.0f ? x / r : x * r;
    x -= c.frequency_penalty * static_cast<float>(count) +
         c.presence_penalty * (count > 0 ? 1.0f : 0.0f);
  }
  return l;
}

TEST(HostSampler, ProcessorsMatchNaiveLoop) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  for (const std::int64_t vocab : {1, 7, 1000, 49153}) {
    SCOPED_TRACE(testing::Message() << "vocab " << vocab);
    HostSampler sampler(vocab);
    for (int trial = 0; trial < (vocab > 10000 ? 4 : 40); ++trial) {
      const SlotSamplingConfig config = random_config(rng, vocab);
      ASSERT_TRUE(sampler.open_slot(3, config).ok());
      // The history arrives in pieces, as accepted tokens do.
      std::vector<std::int32_t> history;
      for (int piece = uniform_int(rng, 0, 4); piece > 0; --piece) {
        const auto tokens = random_tokens(rng, vocab, uniform_int(rng, 1, 20));
        sampler.accept_tokens(3, tokens);
        history.insert(history.end(), tokens.begin(), tokens.end());
      }
      SamplingBatch batch;
      SamplingRow row;
      row.slot = 3;
      row.position = uniform_int(rng, 0, 8);
      if (coin(rng)) {
        batch.allowed_masks = random_mask(rng, vocab);
        row.allowed_mask = 0;
      }
      const std::vector<float> raw = random_logits(rng, vocab);
      std::vector<float> processed(raw.size());
      sampler.process_row(raw, row, batch, processed);
      const std::vector<float> expected = naive_processing(raw, config, history, row, batch);
      for (std::size_t v = 0; v < raw.size(); ++v) {
        ASSERT_EQ(processed[v], expected[v]) << "token " << v << ", trial " << trial;
      }
      sampler.close_slot(3);
    }
  }
}

TEST(HostSampler, SeededDrawIgnoresBatchAndThreads) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  cpu::ThreadPool pool(2);
  for (const std::int64_t vocab : {1000, 49153}) {
    for (const int mode : {2, 3, 4, 6, 9}) {
      SCOPED_TRACE(testing::Message() << "vocab " << vocab << ", " << mode_name(mode));
      HostSampler sampler(vocab);
      const SlotSamplingConfig config = random_config(rng, vocab);
      const std::vector<std::int32_t> history = random_tokens(rng, vocab, 12);
      SamplingRow target = random_row(rng, vocab, mode);
      target.slot = 0;
      const std::vector<float> target_logits = random_logits(rng, vocab);
      // Reopening the slot before each sample undoes the count the previous one added.
      const auto reopen_target = [&] {
        sampler.close_slot(0);
        ASSERT_TRUE(sampler.open_slot(0, config).ok());
        sampler.accept_tokens(0, history);
      };

      reopen_target();
      SamplingBatch alone;
      alone.rows.push_back(target);
      StepOutput out;
      sampler.sample(target_logits, alone, nullptr, out);
      const std::int32_t token = out.token_ids[0];

      for (const int others : {1, 7, 32}) {
        for (cpu::ThreadPool* threads : {static_cast<cpu::ThreadPool*>(nullptr), &pool}) {
          reopen_target();
          SamplingBatch batch;
          std::vector<float> logits;
          const int at = uniform_int(rng, 0, others);
          for (int i = 0; i <= others; ++i) {
            if (i == at) {
              batch.rows.push_back(target);
              logits.insert(logits.end(), target_logits.begin(), target_logits.end());
              continue;
            }
            SamplingRow row = random_row(rng, vocab, uniform_int(rng, 0, kNumModes - 1));
            row.slot = i + 1;
            sampler.close_slot(row.slot);
            ASSERT_TRUE(sampler.open_slot(row.slot, random_config(rng, vocab)).ok());
            batch.rows.push_back(row);
            const auto l = random_logits(rng, vocab);
            logits.insert(logits.end(), l.begin(), l.end());
          }
          sampler.sample(logits, batch, threads, out);
          EXPECT_EQ(out.token_ids[static_cast<std::size_t>(at)], token)
              << others << " others, " << (threads != nullptr ? "2 threads" : "1 thread");
        }
      }
    }
  }
}

TEST(HostSampler, LogprobsAreTheRawRowsAndReturnedRowsDrawNothing) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  cpu::ThreadPool pool(2);
  constexpr std::int64_t kVocab = 1000;
  HostSampler sampler(kVocab);
  SlotSamplingConfig penalized;
  penalized.frequency_penalty = 1.0f;
  penalized.logit_bias = {{5, 3.0f}, {17, -2.0f}};
  SamplingBatch batch;
  std::vector<float> logits;
  for (int i = 0; i < 33; ++i) {
    SamplingRow row = random_row(rng, kVocab, uniform_int(rng, 0, kNumModes - 1));
    row.slot = i;
    ASSERT_TRUE(sampler.open_slot(i, penalized).ok());
    row.num_logprobs = uniform_int(rng, -1, 20);
    row.return_logits = i % 3 == 1;
    batch.rows.push_back(row);
    const auto l = random_logits(rng, kVocab);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  // Two draft rows of one request share a slot.
  batch.rows[4].slot = batch.rows[1].slot;
  StepOutput out;
  sampler.sample(logits, batch, &pool, out);
  EXPECT_GT(sampler.seconds(), 0.0);
  ASSERT_EQ(out.token_ids.size(), batch.rows.size());
  EXPECT_EQ(out.vocab_size, kVocab);
  std::int32_t next_returned = 0;
  std::vector<float> processed(kVocab);
  for (std::size_t i = 0; i < batch.rows.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "row " << i);
    const SamplingRow& row = batch.rows[i];
    const std::span<const float> raw = row_of(logits, i, kVocab);
    if (row.return_logits) {
      EXPECT_EQ(out.token_ids[i], -1);
      EXPECT_EQ(out.returned_row[i], next_returned++);
      const std::span<const float> back = out.logits(i);
      ASSERT_EQ(back.size(), raw.size());
      EXPECT_TRUE(std::equal(back.begin(), back.end(), raw.begin()));
      // No count: the slot's penalties still see an empty output.
      sampler.process_row(raw, row, batch, processed);
      EXPECT_EQ(processed[5], raw[5] + 3.0f);
      EXPECT_EQ(processed[17], raw[17] - 2.0f);
      for (std::size_t v = 0; v < raw.size(); ++v) {
        if (v != 5 && v != 17) {
          ASSERT_EQ(processed[v], raw[v]) << "token " << v;
        }
      }
      continue;
    }
    EXPECT_EQ(out.returned_row[i], -1);
    EXPECT_TRUE(out.logits(i).empty());
    const std::int32_t token = out.token_ids[i];
    ASSERT_TRUE(token >= 0 && token < kVocab);
    if (row.num_logprobs < 0) continue;
    SampledLogprobs expected;
    compute_logprobs(raw, token, row.num_logprobs, expected);
    const SampledLogprobs& got = out.logprobs[i];
    EXPECT_EQ(got.token_id, token);
    EXPECT_EQ(got.logprob, expected.logprob);
    EXPECT_EQ(got.rank, expected.rank);
    EXPECT_EQ(got.top, expected.top);
    EXPECT_EQ(got.top.size(), static_cast<std::size_t>(row.num_logprobs));
  }
  EXPECT_EQ(out.returned_logits.size(), static_cast<std::size_t>(next_returned * kVocab));
}

TEST(HostSampler, ForcedTokensSkipTheDrawAndCountForPenalties) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed());
  constexpr std::int64_t kVocab = 7;
  HostSampler sampler(kVocab);
  SlotSamplingConfig config;
  config.frequency_penalty = 0.5f;
  config.presence_penalty = 0.25f;
  ASSERT_TRUE(sampler.open_slot(2, config).ok());
  const std::vector<float> raw = random_logits(rng, kVocab);
  SamplingBatch batch;
  SamplingRow row;
  row.slot = 2;
  row.temperature = 1.0f;
  row.seed = rng();
  row.forced_token = 3;
  row.num_logprobs = 2;
  batch.rows.push_back(row);
  StepOutput out;
  std::vector<float> processed(kVocab);
  for (int count = 1; count <= 2; ++count) {
    sampler.sample(raw, batch, nullptr, out);
    EXPECT_EQ(out.token_ids[0], 3);
    SampledLogprobs expected;
    compute_logprobs(raw, 3, 2, expected);
    EXPECT_EQ(out.logprobs[0].token_id, 3);
    EXPECT_EQ(out.logprobs[0].logprob, expected.logprob);
    sampler.process_row(raw, row, batch, processed);
    EXPECT_EQ(processed[3], raw[3] - (0.5f * static_cast<float>(count) + 0.25f));
    EXPECT_EQ(processed[2], raw[2]);
  }
}

TEST(HostSampler, CountsStartEmptyAfterReopen) {
  constexpr std::int64_t kVocab = 7;
  HostSampler sampler(kVocab);
  SlotSamplingConfig config;
  config.frequency_penalty = 1.0f;
  config.repetition_penalty = 2.0f;
  config.prompt_token_ids = {1};
  ASSERT_TRUE(sampler.open_slot(0, config).ok());
  sampler.accept_tokens(0, std::vector<std::int32_t>{4, 4, 6});
  const std::vector<float> raw = {1.0f, 2.0f, -1.0f, 0.5f, 4.0f, 3.0f, -2.0f};
  SamplingBatch batch;
  SamplingRow row;
  row.slot = 0;
  std::vector<float> processed(kVocab);
  sampler.process_row(raw, row, batch, processed);
  EXPECT_EQ(processed, (std::vector<float>{1.0f, 1.0f, -1.0f, 0.5f, 0.0f, 3.0f, -5.0f}));
  sampler.close_slot(0);
  EXPECT_FALSE(sampler.is_open(0));
  ASSERT_TRUE(sampler.open_slot(0, config).ok());
  sampler.process_row(raw, row, batch, processed);
  EXPECT_EQ(processed, (std::vector<float>{1.0f, 1.0f, -1.0f, 0.5f, 4.0f, 3.0f, -2.0f}));
}

TEST(HostSampler, OpenSlotRejectsBadInput) {
  HostSampler sampler(10);
  const auto code = [&](std::int32_t slot, const SlotSamplingConfig& c) {
    return sampler.open_slot(slot, c).code();
  };
  SlotSamplingConfig bad_bias;
  bad_bias.logit_bias = {{10, 1.0f}};
  SlotSamplingConfig negative_bias;
  negative_bias.logit_bias = {{-1, 1.0f}};
  SlotSamplingConfig twice;
  twice.logit_bias = {{2, 1.0f}, {2, 1.0f}};
  SlotSamplingConfig bad_banned;
  bad_banned.min_tokens = 1;
  bad_banned.min_tokens_banned_ids = {3, 11};
  SlotSamplingConfig bad_prompt;
  bad_prompt.repetition_penalty = 1.5f;
  bad_prompt.prompt_token_ids = {0, 10};
  for (const SlotSamplingConfig* c :
       {&bad_bias, &negative_bias, &twice, &bad_banned, &bad_prompt}) {
    EXPECT_EQ(code(1, *c), StatusCode::kInvalidArgument);
    EXPECT_FALSE(sampler.is_open(1));
  }
  EXPECT_EQ(code(-1, {}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(1, {}), StatusCode::kOk);
  EXPECT_TRUE(sampler.is_open(1));
  EXPECT_EQ(code(1, {}), StatusCode::kInvalidArgument);
  sampler.close_slot(1);
  sampler.close_slot(7);  // never opened: a no-op
  EXPECT_FALSE(sampler.is_open(7));
  EXPECT_EQ(code(1, {}), StatusCode::kOk);
}

}  // namespace
}  // namespace pagoda::sampling
