// The engine's side of reasoning traces: which live requests are traced, and the events it
// hands to the trace sink as their lives unfold. Runs on the engine thread only.
//
// Requests are known by their slot (slot_allocator.h): admitted() marks a slot traced, with the
// request id its events carry, and release() (from EngineCore::release_slot) clears it, so the
// slot's next request is traced only if it asks to be.
//
// Cost model: with no sink every hook returns at its first branch. With a sink, only traced
// requests cost anything, and the time spent building and handing over their events is
// accumulated (EngineStats::trace_seconds), so the price of tracing is measured, not guessed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request_output.h"
#include "engine/scheduler.h"
#include "engine/scheduler_output.h"
#include "pagoda/tokenizer.h"
#include "sampling/logprobs.h"
#include "trace/trace_sink.h"

namespace pagoda::engine {

class RequestTracer {
 public:
  /// `sink` null: tracing off. `top_n`: alternatives captured per token. `unix_origin`: Unix
  /// time of the engine clock's zero. `tokenizer` must outlive the tracer.
  RequestTracer(std::shared_ptr<trace::TraceSink> sink, std::int64_t top_n,
                const Tokenizer& tokenizer, double unix_origin);

  /// Whether a sink is attached.
  bool enabled() const { return sink_ != nullptr; }
  /// Whether the request at `slot` is traced.
  bool is_traced(std::int32_t slot) const;
  /// Alternatives the sampler must compute at `slot` for the trace (0 when untraced).
  std::int64_t top_n_for(std::int32_t slot) const { return is_traced(slot) ? top_n_ : 0; }

  /// Request `request_id` entered the engine at `slot` (free here); `traced` starts tracing it.
  void admitted(std::int32_t slot, const std::string& request_id, bool traced,
                std::int64_t num_prompt_tokens, double now);
  /// The start of step `step` (1-based); `batch_size` requests run in it.
  void begin_step(std::int64_t step, std::int64_t batch_size);
  /// What the scheduler planned: scheduled / resumed / prefill_chunk / preempted events.
  void scheduled(const SchedulerOutput& output, const Scheduler& scheduler, double now);
  /// A token sampled at `slot` at output position `index`; `logprobs` when computed.
  void token(std::int32_t slot, std::int64_t index, std::int32_t token_id,
             const sampling::SampledLogprobs* logprobs, double now);
  /// Drafts verified at `slot`: `num_accepted` of `num_drafts` accepted, the first verified
  /// token at output position `index`.
  void speculation(std::int32_t slot, std::int64_t index, std::int64_t num_drafts,
                   std::int64_t num_accepted, double now);
  /// A thinking span opened (at output position `index`; 0 when the prompt opened it).
  void reasoning_start(std::int32_t slot, std::int64_t index, double now);
  /// The thinking span closed after `num_tokens` tokens; `forced` by the budget.
  void reasoning_end(std::int32_t slot, std::int64_t index, std::int64_t num_tokens, bool forced,
                     double now);
  /// The final output of the request at `slot`.
  void finished(std::int32_t slot, const RequestOutput& output, double now);
  /// Forgets the request at `slot`; no-op when it is not traced.
  void release(std::int32_t slot);

  /// Engine seconds spent producing trace data so far.
  double seconds_spent() const { return seconds_spent_; }
  /// The sink's counters (zeros when off).
  trace::TraceSinkStats sink_stats() const;

 private:
  struct Traced {
    std::string request_id;  // empty: the slot is not traced
    std::int64_t num_prompt_tokens = 0;
  };
  trace::TraceEvent event(trace::TraceEventKind kind, const Traced& traced, double now) const;
  void emit(const trace::TraceEvent& event) { sink_->write(event); }
  const std::string& token_text(std::int32_t token_id);
  // The traced request at `slot`, or nullptr.
  const Traced* find(std::int32_t slot) const;

  std::shared_ptr<trace::TraceSink> sink_;
  std::int64_t top_n_;
  const Tokenizer& tokenizer_;
  double unix_origin_;
  std::int64_t step_ = 0;
  std::int64_t batch_size_ = 0;
  double seconds_spent_ = 0.0;
  std::vector<Traced> traced_;  // by slot, grown on demand
  std::int32_t num_traced_ = 0;
  // Each token's text, decoded once: a traced step spells 1 + top_n tokens per request.
  std::unordered_map<std::int32_t, std::string> token_texts_;
};

}  // namespace pagoda::engine
