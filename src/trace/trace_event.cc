#include "trace/trace_event.h"

#include <nlohmann/json.hpp>

namespace pagoda::trace {

std::string_view trace_event_name(TraceEventKind kind) {
  switch (kind) {
    case TraceEventKind::kAdmitted: return "admitted";
    case TraceEventKind::kScheduled: return "scheduled";
    case TraceEventKind::kPrefillChunk: return "prefill_chunk";
    case TraceEventKind::kToken: return "token";
    case TraceEventKind::kReasoningStart: return "reasoning_start";
    case TraceEventKind::kReasoningEnd: return "reasoning_end";
    case TraceEventKind::kPreempted: return "preempted";
    case TraceEventKind::kResumed: return "resumed";
    case TraceEventKind::kFinished: return "finished";
    case TraceEventKind::kSpeculation: return "speculation";
  }
  return "unknown";
}

namespace {

// Seconds, or null when the milestone was never reached.
nlohmann::json optional_seconds(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

std::string to_json_line(const TraceEvent& e) {
  nlohmann::ordered_json j;
  j["event"] = trace_event_name(e.kind);
  j["request_id"] = e.request_id;
  j["time"] = e.time;
  j["step"] = e.step;
  switch (e.kind) {
    case TraceEventKind::kAdmitted: j["num_prompt_tokens"] = e.num_prompt_tokens; break;
    case TraceEventKind::kScheduled:
      j["num_prompt_tokens"] = e.num_prompt_tokens;
      j["num_cached_tokens"] = e.num_cached_tokens;
      break;
    case TraceEventKind::kPrefillChunk:
      j["num_chunk_tokens"] = e.num_chunk_tokens;
      j["num_computed_tokens"] = e.num_computed_tokens;
      j["num_prompt_tokens"] = e.num_prompt_tokens;
      break;
    case TraceEventKind::kToken: {
      j["index"] = e.index;
      j["token_id"] = e.token_id;
      j["text"] = e.text;
      j["logprob"] = e.logprob ? nlohmann::json(*e.logprob) : nlohmann::json(nullptr);
      nlohmann::ordered_json top = nlohmann::ordered_json::array();
      for (const TraceAlternative& a : e.alternatives) {
        top.push_back({{"token_id", a.token_id}, {"text", a.text}, {"logprob", a.logprob}});
      }
      j["top"] = std::move(top);
      j["batch_size"] = e.batch_size;
      break;
    }
    case TraceEventKind::kReasoningStart: j["index"] = e.index; break;
    case TraceEventKind::kReasoningEnd:
      j["index"] = e.index;
      j["num_reasoning_tokens"] = e.num_reasoning_tokens;
      j["forced"] = e.forced;
      break;
    case TraceEventKind::kPreempted:
    case TraceEventKind::kResumed: j["num_output_tokens"] = e.num_output_tokens; break;
    case TraceEventKind::kFinished:
      j["finish_reason"] = e.finish_reason;
      j["num_prompt_tokens"] = e.num_prompt_tokens;
      j["num_cached_tokens"] = e.num_cached_tokens;
      j["num_output_tokens"] = e.num_output_tokens;
      j["num_reasoning_tokens"] = e.num_reasoning_tokens;
      j["queue_time"] = optional_seconds(e.queue_time);
      j["time_to_first_token"] = optional_seconds(e.time_to_first_token);
      j["end_to_end_latency"] = optional_seconds(e.end_to_end_latency);
      break;
    case TraceEventKind::kSpeculation:
      j["index"] = e.index;
      j["num_draft_tokens"] = e.num_draft_tokens;
      j["num_accepted_tokens"] = e.num_accepted_tokens;
      break;
  }
  // dump() escapes every control character; `replace` turns invalid UTF-8 into U+FFFD instead
  // of throwing, so a half token's bytes cannot make an event unwritable.
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace pagoda::trace
