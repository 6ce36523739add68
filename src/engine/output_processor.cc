#include "engine/output_processor.h"

#include <utility>

#include "common/check.h"

namespace pagoda::engine {

RequestOutputState* OutputProcessor::find(std::int32_t slot) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= states_.size()) return nullptr;
  std::optional<RequestOutputState>& state = states_[static_cast<std::size_t>(slot)];
  return state ? &*state : nullptr;
}

const RequestOutputState* OutputProcessor::find(std::int32_t slot) const {
  return const_cast<OutputProcessor*>(this)->find(slot);
}

bool OutputProcessor::has_request(std::int32_t slot) const {
  const RequestOutputState* state = find(slot);
  return state != nullptr && !state->finished();
}

Status OutputProcessor::add_request(std::int32_t slot, std::string request_id,
                                    OutputOptions options, std::int64_t num_prompt_tokens,
                                    double arrival_time) {
  PAGODA_RETURN_IF_ERROR(options.validate());
  PAGODA_CHECK(slot >= 0 && find(slot) == nullptr)
      << "slot " << slot << " given to " << request_id << " was not released";
  if (static_cast<std::size_t>(slot) >= states_.size()) states_.resize(slot + 1);
  states_[static_cast<std::size_t>(slot)].emplace(
      std::move(request_id), tokenizer_, std::move(options), num_prompt_tokens, arrival_time);
  ++num_live_;
  return Status::ok_status();
}

void OutputProcessor::record_scheduled(const SchedulerOutput& output, double now) {
  for (const ScheduledRequest& scheduled : output.requests) {
    RequestOutputState* state = find(scheduled.slot);
    PAGODA_CHECK(state != nullptr)
        << scheduled.request_id << " scheduled without being added to output processing";
    state->record_scheduled(now);
  }
}

ProcessedOutputs OutputProcessor::process(std::span<const RequestUpdate> updates, double now,
                                          std::span<const std::vector<TokenLogprobs>> logprobs) {
  PAGODA_CHECK(logprobs.empty() || logprobs.size() == updates.size())
      << "logprobs must be empty or aligned with the updates";
  ProcessedOutputs result;
  for (std::size_t i = 0; i < updates.size(); ++i) {
    const RequestUpdate& update = updates[i];
    RequestOutputState* state = find(update.slot);
    PAGODA_CHECK(state != nullptr && !state->finished())
        << update.request_id << " has no output state (never added, or already finished)";
    std::optional<RequestOutput> output = state->apply(
        update, logprobs.empty() ? std::span<const TokenLogprobs>() : logprobs[i], now);
    if (output) {
      result.outputs.push_back(std::move(*output));
      result.output_slots.push_back(update.slot);
    }
    if (state->has_reasoning()) {
      result.reasoning.push_back({.slot = update.slot,
                                  .inside = state->in_reasoning(),
                                  .opened = state->reasoning_opened(),
                                  .closed = state->reasoning_closed(),
                                  .num_reasoning_tokens = state->num_reasoning_tokens(),
                                  .num_output_tokens = update.num_output_tokens});
    }
    if (!state->finished()) continue;
    --num_live_;
    if (state->stopped_by_string() && !update.finished()) {
      result.requests_to_abort.push_back(update.slot);
    }
  }
  return result;
}

std::optional<RequestOutput> OutputProcessor::abort(std::int32_t slot, double now) {
  RequestOutputState* state = find(slot);
  if (state == nullptr || state->finished()) return std::nullopt;
  --num_live_;
  return state->abort(now);
}

void OutputProcessor::release(std::int32_t slot) {
  RequestOutputState* state = find(slot);
  if (state == nullptr) return;
  if (!state->finished()) --num_live_;
  states_[static_cast<std::size_t>(slot)].reset();
}

}  // namespace pagoda::engine
