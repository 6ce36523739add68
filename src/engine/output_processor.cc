#include "engine/output_processor.h"

#include <utility>

#include "common/check.h"

namespace pagoda::engine {

Status OutputProcessor::add_request(std::string request_id, OutputOptions options,
                                    std::int64_t num_prompt_tokens, double arrival_time) {
  PAGODA_RETURN_IF_ERROR(options.validate());
  if (states_.contains(request_id)) {
    return invalid_argument("request id '" + request_id + "' is already in use");
  }
  std::string key = request_id;
  states_.emplace(std::move(key),
                  RequestOutputState(std::move(request_id), tokenizer_, std::move(options),
                                     num_prompt_tokens, arrival_time));
  return Status::ok_status();
}

void OutputProcessor::record_scheduled(const SchedulerOutput& output, double now) {
  for (const ScheduledRequest& scheduled : output.requests) {
    const auto it = states_.find(scheduled.request_id);
    PAGODA_CHECK(it != states_.end())
        << scheduled.request_id << " scheduled without being added to output processing";
    it->second.record_scheduled(now);
  }
}

ProcessedOutputs OutputProcessor::process(std::span<const RequestUpdate> updates, double now,
                                          std::span<const std::vector<TokenLogprobs>> logprobs) {
  PAGODA_CHECK(logprobs.empty() || logprobs.size() == updates.size())
      << "logprobs must be empty or aligned with the updates";
  ProcessedOutputs result;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    const RequestUpdate& update = updates[i];
    const auto it = states_.find(update.request_id);
    PAGODA_CHECK(it != states_.end())
        << update.request_id << " has no output state (never added, or already finished)";
    RequestOutputState& state = it->second;
    std::optional<RequestOutput> output =
        state.apply(update, logprobs.empty() ? std::span<const TokenLogprobs>() : logprobs[i], now);
    if (output) result.outputs.push_back(std::move(*output));
    if (state.has_reasoning()) {
      result.reasoning.push_back({.request_id = update.request_id,
                                  .inside = state.in_reasoning(),
                                  .opened = state.reasoning_opened(),
                                  .closed = state.reasoning_closed(),
                                  .num_reasoning_tokens = state.num_reasoning_tokens(),
                                  .num_output_tokens = update.num_output_tokens});
    }
    if (!state.finished()) continue;
    if (state.stopped_by_string() && !update.finished()) {
      result.requests_to_abort.push_back(update.request_id);
    }
    states_.erase(it);
  }
  return result;
}

std::optional<RequestOutput> OutputProcessor::abort(std::string_view request_id, double now) {
  const auto it = states_.find(request_id);
  if (it == states_.end()) return std::nullopt;
  RequestOutput output = it->second.abort(now);
  states_.erase(it);
  return output;
}

}  // namespace pagoda::engine
