// What a client sees of a request after a step: the new text and tokens since its previous
// output, and at the end why it finished, how many tokens it cost and how long it took.
// Frontends turn these into SSE chunks or gRPC stream messages; they never detokenize.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_status.h"
#include "engine/request_timings.h"
#include "engine/token_logprobs.h"

namespace pagoda::engine {

/// Token counts for OpenAI's `usage`.
struct RequestUsage {
  /// Prompt length.
  std::int64_t num_prompt_tokens = 0;
  /// Tokens generated, the stopping token included (as vLLM counts them).
  std::int64_t num_completion_tokens = 0;
  /// Prompt tokens served from the prefix cache (usage.prompt_tokens_details.cached_tokens).
  std::int64_t num_cached_prompt_tokens = 0;
  /// Of the completion tokens, those generated inside the thinking span
  /// (usage.completion_tokens_details.reasoning_tokens).
  std::int64_t num_reasoning_tokens = 0;
};

/// One output of one request. In streaming mode every step with new tokens yields one (a delta);
/// otherwise only the final one comes, carrying everything. Exactly one has `finished` set.
struct RequestOutput {
  std::string request_id;
  /// Text since this request's previous output: whole UTF-8 characters only, stop-string
  /// candidates held back until they can no longer match.
  std::string text;
  /// With a reasoning parser: the thinking-span text since the previous output (OpenAI-style
  /// `reasoning_content`), held back the same way; `text` then holds only the answer.
  std::string reasoning_text;
  /// Token ids since the previous output (the stopping token included, even when its text is
  /// not part of `text`).
  std::vector<std::int32_t> token_ids;
  /// One entry per id in token_ids when the request asked for logprobs; empty otherwise.
  std::vector<TokenLogprobs> logprobs;
  /// Prompt logprobs, when asked for: one entry per prompt token after the first (the first has
  /// none), in prompt order; all of them in the request's first output, empty in later ones.
  std::vector<TokenLogprobs> prompt_logprobs;

  /// Whether this is the request's last output.
  bool finished = false;
  /// kRunning until finished, then kFinishedStopped, kFinishedLength or kFinishedAborted.
  RequestStatus status = RequestStatus::kRunning;
  /// The EOS or stop token id that finished the request (vLLM's integer stop_reason).
  std::optional<std::int32_t> stop_token_id;
  /// The stop string that finished the request (vLLM's string stop_reason).
  std::optional<std::string> stop_string;

  /// Set on the final output.
  RequestUsage usage;
  /// Set on the final output.
  RequestTimings timings;

  /// OpenAI finish_reason: "stop", "length", "abort", or empty while running.
  std::string_view finish_reason() const { return engine::finish_reason(status); }
};

}  // namespace pagoda::engine
