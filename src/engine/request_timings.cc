#include "engine/request_timings.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::engine {
namespace {

// A clock that runs backwards would produce negative latencies in metrics; the engine's clock is
// monotonic, so a time earlier than one already recorded is a bug in the caller.
void check_not_before(const RequestTimings& t, double now) {
  double latest = t.arrival_time;
  if (t.first_scheduled_time) latest = std::max(latest, *t.first_scheduled_time);
  if (t.last_token_time) latest = std::max(latest, *t.last_token_time);
  PAGODA_CHECK(now >= latest) << "time went backwards: " << now << " < " << latest;
  PAGODA_CHECK(!t.finished_time) << "request already finished at " << *t.finished_time;
}

}  // namespace

void RequestTimings::record_scheduled(double now) {
  check_not_before(*this, now);
  if (!first_scheduled_time) first_scheduled_time = now;
}

void RequestTimings::record_tokens(double now) {
  check_not_before(*this, now);
  if (!first_token_time) {
    first_token_time = now;
  } else {
    inter_token_latencies.push_back(now - *last_token_time);
  }
  last_token_time = now;
}

void RequestTimings::record_finished(double now) {
  check_not_before(*this, now);
  finished_time = now;
}

std::optional<double> RequestTimings::queue_time() const {
  if (!first_scheduled_time) return std::nullopt;
  return *first_scheduled_time - arrival_time;
}

std::optional<double> RequestTimings::time_to_first_token() const {
  if (!first_token_time) return std::nullopt;
  return *first_token_time - arrival_time;
}

std::optional<double> RequestTimings::end_to_end_latency() const {
  if (!finished_time) return std::nullopt;
  return *finished_time - arrival_time;
}

std::optional<double> RequestTimings::time_per_output_token(std::int64_t num_output_tokens) const {
  if (num_output_tokens < 2 || !first_token_time) return std::nullopt;
  return (*last_token_time - *first_token_time) / static_cast<double>(num_output_tokens - 1);
}

}  // namespace pagoda::engine
