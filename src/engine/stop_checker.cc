#include "engine/stop_checker.h"

#include <algorithm>

namespace pagoda::engine {

std::optional<RequestStatus> check_stop(const Request& request, std::int64_t max_model_len) {
  const std::int64_t num_output = request.num_output_tokens();
  if (num_output == 0) return std::nullopt;
  const RequestOptions& options = request.options();
  if (num_output >= options.min_tokens) {
    const std::int32_t last = request.output_token_ids().back();
    const bool is_eos = !options.ignore_eos && options.eos_token_id == last;
    const auto& stops = options.stop_token_ids;
    if (is_eos || std::find(stops.begin(), stops.end(), last) != stops.end()) {
      return RequestStatus::kFinishedStopped;
    }
  }
  if (num_output >= request.max_tokens() || request.num_tokens() >= max_model_len) {
    return RequestStatus::kFinishedLength;
  }
  return std::nullopt;
}

}  // namespace pagoda::engine
