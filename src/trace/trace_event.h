// What the engine tells a trace sink about a traced request, one event at a time. Events carry
// ids, counts, token texts and timings, never the prompt's text or anything from the transport
// (API keys, headers): a trace file can be shared with whoever debugs the model.
//
//   admitted -> scheduled -> prefill_chunk ... -> token, token, ... -> finished
//                              (preempted -> resumed -> prefill_chunk ...)   (any time: finished)
//   reasoning_start / reasoning_end bracket the tokens of a thinking span.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::trace {

enum class TraceEventKind : std::uint8_t {
  kAdmitted,        ///< The engine accepted the request.
  kScheduled,       ///< First given tokens by the scheduler (prefix-cache hits known).
  kPrefillChunk,    ///< A step computed part of the prompt.
  kToken,           ///< A token was sampled.
  kReasoningStart,  ///< A thinking span opened (in the prompt or the output).
  kReasoningEnd,    ///< The thinking span closed (by the model or by the reasoning budget).
  kPreempted,       ///< Lost its KV blocks; will be recomputed.
  kResumed,         ///< Scheduled again after a preemption.
  kFinished,        ///< Final output made.
  kSpeculation,     ///< Drafted tokens were verified (speculative decoding).
};

/// The event's name in the JSONL file ("admitted", "token", ...).
std::string_view trace_event_name(TraceEventKind kind);

/// One alternative at a sampled position.
struct TraceAlternative {
  std::int32_t token_id = 0;
  std::string text;
  float logprob = 0.0F;
};

/// One event. Only the fields of its kind are meaningful; to_json writes only those.
struct TraceEvent {
  TraceEventKind kind = TraceEventKind::kAdmitted;
  std::string request_id;
  /// Unix time in seconds.
  double time = 0.0;
  /// The engine step the event belongs to (0 before the first step).
  std::int64_t step = 0;

  // kAdmitted: prompt length. kScheduled: also the prompt tokens served from the prefix cache.
  std::int64_t num_prompt_tokens = 0;
  std::int64_t num_cached_tokens = 0;
  // kPrefillChunk: tokens computed this step, and how many of the prompt are done after it.
  std::int64_t num_chunk_tokens = 0;
  std::int64_t num_computed_tokens = 0;
  // kToken: position among the outputs (0 = first), the token, its text and logprob, the
  // alternatives, and how many requests the step carried.
  std::int64_t index = 0;
  std::int32_t token_id = 0;
  std::string text;
  std::optional<float> logprob;
  std::vector<TraceAlternative> alternatives;
  std::int64_t batch_size = 0;
  // kReasoningEnd: tokens inside the span, and whether the budget closed it.
  std::int64_t num_reasoning_tokens = 0;
  bool forced = false;
  // kSpeculation: output position of the first verified token (index), drafts verified and
  // how many were accepted.
  std::int64_t num_draft_tokens = 0;
  std::int64_t num_accepted_tokens = 0;
  // kFinished: finish_reason, usage and timings (seconds; unset when never reached).
  std::string finish_reason;
  std::int64_t num_output_tokens = 0;
  std::optional<double> queue_time;
  std::optional<double> time_to_first_token;
  std::optional<double> end_to_end_latency;
};

/// The event as one line of JSON (no newline). Texts are JSON strings whatever bytes they hold:
/// control characters are escaped and invalid UTF-8 becomes U+FFFD, so no event can break a line
/// or forge another.
std::string to_json_line(const TraceEvent& event);

}  // namespace pagoda::trace
