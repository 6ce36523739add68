// When a request is done, judged on token ids only (stop STRINGS belong to output processing,
// which sees text). Order of the tests, after a token is appended:
//
//   1. fewer than min_tokens generated   -> keep going (EOS and stop ids are ignored)
//   2. EOS (unless ignore_eos) or a stop token id -> finished_stopped
//   3. max_tokens generated, or max_model_len reached -> finished_length
//
// A stop token that is also the last allowed token reports "stop": the model ended on its own.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/request.h"

namespace pagoda::engine {

/// The terminal status `request` reaches with its last token, or nullopt to keep generating.
std::optional<RequestStatus> check_stop(const Request& request, std::int64_t max_model_len);

}  // namespace pagoda::engine
