// transformers' golden files for the real models (tests/data/forward/smollm2_greedy.json,
// gemma3_greedy.json) as the CPU and GPU model tests read them: each case's prompt, greedy
// continuation, near-tie steps and top-10 log-probabilities, the log-softmax the tests compare
// with, and the CPU tests' comparison.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "model_test_util.h"
#include "sampling/sampler.h"

namespace pagoda::models::testing {

/// One prompt of the golden file.
struct GoldenCase {
  std::string name;
  std::vector<std::int32_t> prompt_ids;
  std::vector<std::int32_t> greedy_ids;  ///< 32 tokens
  std::vector<int> near_tie_steps;       ///< steps whose top-2 gap is < 1e-3 in the reference
  /// Per step (the first 16): the reference's top-10 ids and their fp32 log-probabilities.
  std::vector<std::vector<std::int32_t>> top_ids;
  std::vector<std::vector<double>> top_logprobs;

  bool near_tie(std::size_t step) const {
    return std::find(near_tie_steps.begin(), near_tie_steps.end(), static_cast<int>(step)) !=
           near_tie_steps.end();
  }
};

/// The cases of `path`; empty (and a test failure at the caller's ASSERT) when unreadable.
inline std::vector<GoldenCase> read_golden_cases(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return {};
  const auto golden = nlohmann::json::parse(in);
  std::vector<GoldenCase> out;
  for (const auto& c : golden["cases"]) {
    GoldenCase g{.name = c["name"].get<std::string>(),
                 .prompt_ids = c["prompt_ids"].get<std::vector<std::int32_t>>(),
                 .greedy_ids = c["greedy_ids"].get<std::vector<std::int32_t>>(),
                 .near_tie_steps = c["near_tie_steps"].get<std::vector<int>>()};
    for (const auto& step : c["topk"]) {
      g.top_ids.push_back(step["ids"].get<std::vector<std::int32_t>>());
      g.top_logprobs.push_back(step["logprobs"].get<std::vector<double>>());
    }
    out.push_back(std::move(g));
  }
  return out;
}

/// log softmax in double over fp32 logits.
inline std::vector<double> log_softmax(std::span<const float> logits) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(l - max_logit);
  const double log_sum = max_logit + std::log(sum);
  std::vector<double> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - log_sum;
  return out;
}

/// Runs every case through `executor` (prompts prefilled in `chunk`-token pieces): top-10
/// log-probabilities within `tolerance` of the reference's for the steps it records, greedy
/// tokens equal to its tokens; at a recorded near tie (reference gap < 1e-3) either side is
/// right, the reference's token within `tolerance` of our best, and the comparison of that case
/// ends (the continuations may part ways). Returns the largest log-probability difference.
inline double expect_greedy_and_logprobs_match(ModelExecutor& executor,
                                               const std::vector<GoldenCase>& cases,
                                               std::int64_t chunk, double tolerance) {
  const std::int64_t vocab = executor.info().vocab_size;
  double worst_logprob_diff = 0.0;
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<std::int32_t>& want = c.greedy_ids;
    SequenceRun run(executor, 16, static_cast<std::int64_t>(c.prompt_ids.size() + want.size()),
                    chunk);
    std::vector<float> logits = run.prefill(c.prompt_ids, chunk);
    for (std::size_t step = 0; step < want.size(); ++step) {
      EXPECT_EQ(static_cast<std::int64_t>(logits.size()), vocab);
      if (static_cast<std::int64_t>(logits.size()) != vocab) break;
      if (step < c.top_ids.size()) {
        const auto lp = log_softmax(logits);
        const auto& ids = c.top_ids[step];
        const auto& want_lp = c.top_logprobs[step];
        for (std::size_t r = 0; r < ids.size(); ++r) {
          worst_logprob_diff = std::max(worst_logprob_diff, std::abs(lp[ids[r]] - want_lp[r]));
          EXPECT_NEAR(lp[ids[r]], want_lp[r], tolerance) << "step " << step << " id " << ids[r];
        }
      }
      const std::int32_t token = sampling::argmax(logits);
      if (c.near_tie(step)) {
        EXPECT_GE(logits[want[step]], logits[token] - tolerance)
            << "step " << step << ": " << token;
        break;
      }
      EXPECT_EQ(token, want[step]) << "step " << step;
      if (token != want[step]) break;
      if (step + 1 < want.size()) logits = run.step(std::span(&token, 1));
    }
  }
  return worst_logprob_diff;
}

/// What expect_logprobs_close saw.
struct CloseRun {
  double worst_logprob_diff = 0.0;  ///< over the recorded steps up to each case's divergence
  int diverged = 0;                 ///< cases whose greedy tokens parted within their 32 steps
};

/// vLLM's check_logprobs_close on the golden cases, for numerics too coarse for the near-tie rule
/// (int8 activations): greedy tokens equal until the first step where they differ; there each
/// side's token is among the other's `top_k` most likely (the reference's recorded top-10 where
/// the step has one, else only ours) and the comparison of that case ends. At each recorded step
/// up to there, the reference's top-10 log-probabilities are within `tolerance` of ours.
inline CloseRun expect_logprobs_close(ModelExecutor& executor, const std::vector<GoldenCase>& cases,
                                      std::int64_t chunk, double tolerance, int top_k) {
  const std::int64_t vocab = executor.info().vocab_size;
  CloseRun out;
  for (const GoldenCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<std::int32_t>& want = c.greedy_ids;
    SequenceRun run(executor, 16, static_cast<std::int64_t>(c.prompt_ids.size() + want.size()),
                    chunk);
    std::vector<float> logits = run.prefill(c.prompt_ids, chunk);
    for (std::size_t step = 0; step < want.size(); ++step) {
      EXPECT_EQ(static_cast<std::int64_t>(logits.size()), vocab);
      if (static_cast<std::int64_t>(logits.size()) != vocab) break;
      if (step < c.top_ids.size()) {
        const auto lp = log_softmax(logits);
        const auto& ids = c.top_ids[step];
        const auto& want_lp = c.top_logprobs[step];
        for (std::size_t r = 0; r < ids.size(); ++r) {
          out.worst_logprob_diff =
              std::max(out.worst_logprob_diff, std::abs(lp[ids[r]] - want_lp[r]));
          EXPECT_NEAR(lp[ids[r]], want_lp[r], tolerance) << "step " << step << " id " << ids[r];
        }
      }
      const std::int32_t token = sampling::argmax(logits);
      if (token != want[step]) {
        ++out.diverged;
        // The reference's token in our top_k: fewer than top_k ids score above it.
        const float theirs = logits[static_cast<std::size_t>(want[step])];
        const auto above =
            std::count_if(logits.begin(), logits.end(), [&](float l) { return l > theirs; });
        EXPECT_LT(above, top_k) << "step " << step << ": the reference's " << want[step];
        if (step < c.top_ids.size()) {
          const auto& ids = c.top_ids[step];
          const auto rank = std::find(ids.begin(), ids.end(), token) - ids.begin();
          EXPECT_LT(rank, std::min<std::ptrdiff_t>(top_k, static_cast<std::ptrdiff_t>(ids.size())))
              << "step " << step << ": our " << token;
        }
        break;
      }
      if (step + 1 < want.size()) logits = run.step(std::span(&token, 1));
    }
  }
  return out;
}

}  // namespace pagoda::models::testing
