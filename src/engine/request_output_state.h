// Output state of one live request: its streaming detokenizer, stop-string matcher, the text and
// tokens not yet delivered, usage and timings. Per step:
//
//   new token ids --DecodeStream--> whole characters --StopStringMatcher--> released text
//        |                                                   |
//        +------------------- pending output <---------------+   (delivered: each step when
//                                                                 streaming, else at the end)
//
// The stopping token's text is left out unless include_stop_str_in_output, as vLLM does: EOS
// ends generation, it is not part of the answer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/output_options.h"
#include "engine/reasoning_splitter.h"
#include "engine/request_output.h"
#include "engine/request_timings.h"
#include "engine/request_update.h"
#include "engine/stop_string_matcher.h"
#include "engine/token_logprobs.h"
#include "pagoda/tokenizer.h"

namespace pagoda::engine {

/// Turns one request's token updates into RequestOutputs.
class RequestOutputState {
 public:
  /// `tokenizer` must outlive the state; `options` must validate (CHECKed).
  RequestOutputState(std::string request_id, const Tokenizer& tokenizer, OutputOptions options,
                     std::int64_t num_prompt_tokens, double arrival_time);

  /// Notes that the scheduler ran the request (only the first time counts).
  void record_scheduled(double now) { timings_.record_scheduled(now); }

  /// Applies one step's update. `logprobs` has an entry per new token (extra trailing entries
  /// are ignored) when the request asked for logprobs, and is ignored otherwise. Returns the
  /// output to deliver now, if any; a finished request must not be updated again.
  std::optional<RequestOutput> apply(const RequestUpdate& update,
                                     std::span<const TokenLogprobs> logprobs, double now);

  /// Ends a live request as aborted and returns its final output (held-back text included).
  RequestOutput abort(double now);

  /// Whether the final output has been made.
  bool finished() const { return is_finished(status_); }
  /// Whether a stop string ended the request (the scheduler may still be running it).
  bool stopped_by_string() const { return stop_string_.has_value(); }

  /// Whether the request splits out a thinking span.
  bool has_reasoning() const { return splitter_ != nullptr; }
  /// With a reasoning parser: whether the thinking span is open after the latest update.
  bool in_reasoning() const { return splitter_ && splitter_->inside(); }
  /// Output tokens generated inside the span so far.
  std::int64_t num_reasoning_tokens() const { return usage_.num_reasoning_tokens; }
  /// Whether the span opened / closed during the latest update.
  bool reasoning_opened() const { return reasoning_opened_; }
  bool reasoning_closed() const { return reasoning_closed_; }

 private:
  // Returns how many of the update's tokens the output keeps: all of them, unless a stop string
  // ends inside them (several tokens come at once when speculative drafts are accepted).
  std::size_t detokenize(const RequestUpdate& update);
  // Appends released text to the answer or, inside the thinking span, to the reasoning.
  void release(std::string_view text);
  void release_held_reasoning();
  // Passes decoded text through the stop matcher; true when a stop string ended the request.
  bool feed(std::string_view text);
  RequestOutput make_output(double now);

  std::string request_id_;
  OutputOptions options_;
  std::unique_ptr<DecodeStream> decoder_;
  StopStringMatcher matcher_;
  std::unique_ptr<ReasoningSplitter> splitter_;  // with a reasoning parser only
  bool reasoning_opened_ = false;
  bool reasoning_closed_ = false;
  // Output tokens run through the decoder: the min_tokens count for stop strings.
  std::int64_t num_decoded_tokens_ = 0;

  // Not yet delivered.
  std::string text_;
  std::string reasoning_text_;
  std::vector<std::int32_t> token_ids_;
  std::vector<TokenLogprobs> logprobs_;

  RequestStatus status_ = RequestStatus::kRunning;
  std::optional<std::int32_t> stop_token_id_;
  std::optional<std::string> stop_string_;
  RequestUsage usage_;
  RequestTimings timings_;
};

}  // namespace pagoda::engine
