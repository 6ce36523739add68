#include "engine/output_options.h"

#include "engine/stop_string_matcher.h"

namespace pagoda::engine {

Status OutputOptions::validate() const {
  PAGODA_RETURN_IF_ERROR(StopStringMatcher::validate(stop));
  if (min_tokens < 0) {
    return invalid_argument("'min_tokens' must be >= 0, got " + std::to_string(min_tokens));
  }
  if (num_logprobs && *num_logprobs < 0) {
    return invalid_argument("'logprobs' must be >= 0, got " + std::to_string(*num_logprobs));
  }
  return Status::ok_status();
}

}  // namespace pagoda::engine
