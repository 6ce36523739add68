#include "engine/request.h"

#include <algorithm>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

Request::Request(std::string request_id, std::vector<std::int32_t> prompt_token_ids,
                 RequestOptions options)
    : request_id_(std::move(request_id)),
      token_ids_(std::move(prompt_token_ids)),
      num_prompt_tokens_(static_cast<std::int64_t>(token_ids_.size())),
      options_(std::move(options)) {}

void Request::set_num_computed_tokens(std::int64_t n) {
  PAGODA_CHECK(n >= 0 && n <= num_tokens() + num_samples_in_flight_)
      << request_id_ << ": num_computed_tokens " << n << " outside [0, "
      << num_tokens() + num_samples_in_flight_ << "]";
  num_computed_tokens_ = n;
}

void Request::remove_sample_in_flight() {
  PAGODA_CHECK(num_samples_in_flight_ > 0) << request_id_ << ": no sample in flight";
  --num_samples_in_flight_;
}

void Request::resolve_max_tokens(std::int64_t max_model_len) {
  if (!options_.max_tokens)
    options_.max_tokens = std::max<std::int64_t>(0, max_model_len - num_prompt_tokens_);
}

void Request::set_status(RequestStatus status) {
  PAGODA_CHECK(!is_finished(status_))
      << request_id_ << ": leaving terminal state " << request_status_name(status_);
  status_ = status;
}

}  // namespace pagoda::engine
