// The samplers of every live request, so the engine can sample a step's logits row by row.
// Each request keeps its own Sampler (stages, penalty state, seeded generator): what one request
// draws never depends on which others share its step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagoda/sampling_params.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace pagoda::sampling {

/// Samplers by request id; single-threaded (owned by the engine loop).
class BatchSampler {
 public:
  /// Starts sampling for `request_id` with validated `params`; see Sampler's constructor.
  /// `logprobs_for_trace_only`: params.logprobs was set only because a trace wants the
  /// alternatives, so their computation counts as tracing cost (trace_logprob_seconds()).
  void add(const std::string& request_id, const SamplingParams& params,
           std::span<const std::int32_t> prompt_token_ids, std::vector<std::int32_t> stop_token_ids,
           bool logprobs_for_trace_only = false);
  /// Forgets a request (finished or aborted); no-op for an unknown id.
  void remove(std::string_view request_id);
  /// Whether `request_id` has a sampler.
  bool contains(std::string_view request_id) const;
  /// Live samplers.
  std::size_t size() const { return samplers_.size(); }
  /// `request_id`'s own sampler (speculative verification drives it directly); CHECKs the id.
  Sampler& sampler(std::string_view request_id);

  /// Samples `request_id`'s next token from its row of logits, tells its stateful stages, and
  /// sets `logprobs` when the request asked for them (resets it otherwise).
  std::int32_t sample(std::string_view request_id, std::span<const float> logits /* [vocab] */,
                      std::optional<SampledLogprobs>& logprobs);
  /// Takes `token` as `request_id`'s next token without drawing (a reasoning budget closing the
  /// span): the stateful stages see it as if sampled, and `logprobs` (when asked for) are the
  /// model's own for it.
  void force(std::string_view request_id, std::span<const float> logits /* [vocab] */,
             std::int32_t token, std::optional<SampledLogprobs>& logprobs);

  /// Seconds spent computing logprobs that only a trace asked for.
  double trace_logprob_seconds() const { return trace_logprob_seconds_; }

 private:
  struct Entry {
    Sampler sampler;
    std::optional<std::int64_t> num_logprobs;
    bool logprobs_for_trace_only = false;
  };
  // Sets `logprobs` for `token` when `entry` wants them, timing trace-only ones.
  void fill_logprobs(const Entry& entry, std::span<const float> logits, std::int32_t token,
                     std::optional<SampledLogprobs>& logprobs);

  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, Entry, StringHash, std::equal_to<>> samplers_;
  double trace_logprob_seconds_ = 0.0;
};

}  // namespace pagoda::sampling
