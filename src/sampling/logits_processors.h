// The stages that run first, on the raw logits of the whole vocabulary (vLLM's logits processors
// and penalties): they need entries[id].id == id, which Candidates::reset guarantees and no
// earlier stage breaks. Order in a Sampler: min_tokens, logit_bias, penalties.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "sampling/sampler_stage.h"

namespace pagoda::sampling {

/// Bans the stop tokens (logit -inf) until `min_tokens` tokens have been accepted.
class MinTokensStage final : public SamplerStage {
 public:
  MinTokensStage(std::int64_t min_tokens, std::vector<std::int32_t> stop_token_ids)
      : min_tokens_(min_tokens), stop_token_ids_(std::move(stop_token_ids)) {}
  void apply(Candidates& candidates) override;
  void accept(std::int32_t token) override { ++num_generated_; }

 private:
  std::int64_t min_tokens_;
  std::vector<std::int32_t> stop_token_ids_;
  std::int64_t num_generated_ = 0;
};

/// Adds a fixed bias to some token ids.
class LogitBiasStage final : public SamplerStage {
 public:
  explicit LogitBiasStage(const std::map<std::int32_t, double>& bias);
  void apply(Candidates& candidates) override;

 private:
  std::vector<std::pair<std::int32_t, float>> bias_;
};

/// vLLM's penalties. With seen = prompt or output tokens, count = times generated:
///
///   repetition   seen:      logit > 0 ? logit / r : logit * r
///   frequency    output:    logit -= f * count
///   presence     output:    logit -= p
class PenaltyStage final : public SamplerStage {
 public:
  PenaltyStage(double presence, double frequency, double repetition,
               std::span<const std::int32_t> prompt_token_ids);
  void apply(Candidates& candidates) override;
  void accept(std::int32_t token) override;

 private:
  float presence_;
  float frequency_;
  float repetition_;
  // Distinct prompt tokens that are not (yet) output tokens: repetition only.
  std::vector<std::int32_t> prompt_only_ids_;
  // Output token id -> times generated; each id is penalized on its own, so order is moot.
  std::unordered_map<std::int32_t, std::int32_t> output_counts_;
};

}  // namespace pagoda::sampling
