// transformers' SmolLM2 golden file (tests/data/forward/smollm2_greedy.json) as the CPU and GPU
// model tests read it: each case's prompt, greedy continuation, near-tie steps and top-10
// log-probabilities, plus the log-softmax the tests compare with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

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

}  // namespace pagoda::models::testing
