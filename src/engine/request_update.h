// What one step changed for one request, handed from the scheduler to output processing
// (detokenization, stop strings, streaming).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request_status.h"

namespace pagoda::engine {

/// New tokens of one request after a step, and its end if it ended.
struct RequestUpdate {
  std::string request_id;
  /// The request's slot.
  std::int32_t slot = -1;
  /// Tokens appended this step (the stopping token included).
  std::vector<std::int32_t> new_token_ids;
  /// kRunning, or the terminal status reached this step.
  RequestStatus status = RequestStatus::kRunning;
  /// The EOS or stop token id that finished the request (OpenAI's stop_reason).
  std::optional<std::int32_t> stop_token_id;
  /// Prompt length and the part of it served from the prefix cache (usage accounting).
  std::int64_t num_prompt_tokens = 0;
  std::int64_t num_cached_prompt_tokens = 0;
  /// Tokens generated so far.
  std::int64_t num_output_tokens = 0;

  /// Whether the request ended this step.
  bool finished() const { return is_finished(status); }
};

}  // namespace pagoda::engine
