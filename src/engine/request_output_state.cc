#include "engine/request_output_state.h"

#include <utility>

#include "common/check.h"

namespace pagoda::engine {
namespace {

// Options are validated at admission; a bad one here is a bug in the caller.
OutputOptions checked(OutputOptions options) {
  const Status status = options.validate();
  PAGODA_CHECK(status.ok()) << status.to_string();
  return options;
}

}  // namespace

RequestOutputState::RequestOutputState(std::string request_id, const Tokenizer& tokenizer,
                                       OutputOptions options, std::int64_t num_prompt_tokens,
                                       double arrival_time)
    : request_id_(std::move(request_id)),
      options_(checked(std::move(options))),
      decoder_(tokenizer.start_decode({.skip_special_tokens = options_.skip_special_tokens})),
      matcher_(options_.stop, options_.include_stop_str_in_output) {
  usage_.num_prompt_tokens = num_prompt_tokens;
  timings_.arrival_time = arrival_time;
  if (options_.reasoning) {
    splitter_ =
        std::make_unique<ReasoningSplitter>(*options_.reasoning, options_.reasoning_starts_inside);
  }
}

std::optional<RequestOutput> RequestOutputState::apply(const RequestUpdate& update,
                                                       std::span<const TokenLogprobs> logprobs,
                                                       double now) {
  PAGODA_CHECK(!finished()) << request_id_ << " updated after its final output";
  const std::vector<std::int32_t>& ids = update.new_token_ids;
  if (!ids.empty()) timings_.record_tokens(now);
  usage_.num_prompt_tokens = update.num_prompt_tokens;
  usage_.num_cached_prompt_tokens = update.num_cached_prompt_tokens;
  usage_.num_completion_tokens = update.num_output_tokens;
  token_ids_.insert(token_ids_.end(), ids.begin(), ids.end());
  if (options_.num_logprobs) {
    PAGODA_CHECK_LE(ids.size(), logprobs.size()) << request_id_ << " asked for logprobs";
    for (std::size_t i = 0; i < ids.size(); ++i) {
      PAGODA_CHECK_EQ(logprobs[i].token_id, ids[i]) << "logprobs out of step with tokens";
      TokenLogprobs& kept = logprobs_.emplace_back(logprobs[i]);
      // The sampler may have computed more alternatives (a trace wanted them).
      const auto wanted = static_cast<std::size_t>(*options_.num_logprobs);
      if (kept.top.size() > wanted) kept.top.resize(wanted);
    }
  }

  // Tokens of an update that starts inside the span count as reasoning (the closing tag's
  // tokens included).
  const bool was_in_reasoning = in_reasoning();
  reasoning_opened_ = reasoning_closed_ = false;
  const std::size_t kept = detokenize(update);
  if (kept < ids.size()) {
    // A stop string ended before the update's last token: the output stops exactly where
    // one-token-at-a-time decoding would have stopped, in tokens and usage too.
    const std::size_t dropped = ids.size() - kept;
    token_ids_.resize(token_ids_.size() - dropped);
    usage_.num_completion_tokens -= static_cast<std::int64_t>(dropped);
    if (options_.num_logprobs) logprobs_.resize(logprobs_.size() - dropped);
  }
  if (was_in_reasoning || reasoning_opened_) {
    usage_.num_reasoning_tokens += static_cast<std::int64_t>(kept);
  }
  // A stop string outranks what the scheduler saw (length, or the EOS after it), as in vLLM.
  if (!finished() && update.finished()) {
    status_ = update.status;
    if (status_ == RequestStatus::kFinishedStopped) stop_token_id_ = update.stop_token_id;
  }
  if (finished() || options_.stream) return make_output(now);
  return std::nullopt;
}

std::size_t RequestOutputState::detokenize(const RequestUpdate& update) {
  std::span<const std::int32_t> ids = update.new_token_ids;
  const bool stopped_by_token =
      update.status == RequestStatus::kFinishedStopped && update.stop_token_id.has_value();
  if (stopped_by_token && !options_.include_stop_str_in_output) {
    PAGODA_CHECK(!ids.empty() && ids.back() == *update.stop_token_id)
        << request_id_ << ": the stop token must be the update's last token";
    ids = ids.first(ids.size() - 1);
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ++num_decoded_tokens_;
    if (feed(decoder_->push(ids[i]))) return i + 1;
  }
  const std::size_t all = update.new_token_ids.size();
  if (!update.finished()) return all;
  // The decoder's held-back bytes belong to the last token and may still complete a stop string.
  if (feed(decoder_->finish())) return all;
  release(matcher_.flush());
  release_held_reasoning();
  return all;
}

void RequestOutputState::release(std::string_view text) {
  if (!splitter_) {
    text_ += text;
    return;
  }
  ReasoningSplitter::Split split = splitter_->feed(text);
  reasoning_opened_ = reasoning_opened_ || split.opened;
  reasoning_closed_ = reasoning_closed_ || split.closed;
  if (!options_.separate_reasoning) {
    text_ += text;  // followed, not split: the raw text goes out as it came
    return;
  }
  reasoning_text_ += split.reasoning;
  text_ += split.content;
}

void RequestOutputState::release_held_reasoning() {
  if (!splitter_) return;
  ReasoningSplitter::Split split = splitter_->finish();
  if (!options_.separate_reasoning) return;  // release() already passed the raw text on
  reasoning_text_ += split.reasoning;
  text_ += split.content;
}

bool RequestOutputState::feed(std::string_view text) {
  if (text.empty()) return false;
  const bool detect = num_decoded_tokens_ > options_.min_tokens;
  StopStringMatcher::Result result = matcher_.feed(text, detect);
  release(result.released);
  if (!result.matched) return false;
  release_held_reasoning();
  status_ = RequestStatus::kFinishedStopped;
  stop_string_ = matcher_.stop_strings()[*result.matched];
  stop_token_id_.reset();
  return true;
}

RequestOutput RequestOutputState::abort(double now) {
  PAGODA_CHECK(!finished()) << request_id_ << " aborted after its final output";
  // An aborted request has no stop to find any more: everything decoded so far goes out.
  release(matcher_.feed(decoder_->finish(), /*detect=*/false).released);
  release(matcher_.flush());
  release_held_reasoning();
  status_ = RequestStatus::kFinishedAborted;
  return make_output(now);
}

RequestOutput RequestOutputState::make_output(double now) {
  RequestOutput out;
  out.request_id = request_id_;
  out.text = std::exchange(text_, std::string());
  out.reasoning_text = std::exchange(reasoning_text_, std::string());
  out.token_ids = std::exchange(token_ids_, {});
  out.logprobs = std::exchange(logprobs_, {});
  out.status = status_;
  out.finished = finished();
  if (out.finished) {
    timings_.record_finished(now);
    out.stop_token_id = stop_token_id_;
    out.stop_string = stop_string_;
    out.usage = usage_;
    out.timings = timings_;
  }
  return out;
}

}  // namespace pagoda::engine
