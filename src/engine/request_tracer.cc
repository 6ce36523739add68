#include "engine/request_tracer.h"

#include <chrono>
#include <span>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

namespace {

// Adds the wall time of its scope to `total`.
class CostTimer {
 public:
  explicit CostTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~CostTimer() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  CostTimer(const CostTimer&) = delete;
  CostTimer& operator=(const CostTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

RequestTracer::RequestTracer(std::shared_ptr<trace::TraceSink> sink, std::int64_t top_n,
                             const Tokenizer& tokenizer, double unix_origin)
    : sink_(std::move(sink)), top_n_(top_n), tokenizer_(tokenizer), unix_origin_(unix_origin) {}

bool RequestTracer::is_traced(std::int32_t slot) const {
  return find(slot) != nullptr;
}

const RequestTracer::Traced* RequestTracer::find(std::int32_t slot) const {
  if (num_traced_ == 0 || slot < 0 || static_cast<std::size_t>(slot) >= traced_.size()) {
    return nullptr;
  }
  const Traced& t = traced_[static_cast<std::size_t>(slot)];
  return t.request_id.empty() ? nullptr : &t;
}

trace::TraceEvent RequestTracer::event(trace::TraceEventKind kind, const Traced& traced,
                                       double now) const {
  trace::TraceEvent e;
  e.kind = kind;
  e.request_id = traced.request_id;
  e.time = unix_origin_ + now;
  e.step = step_;
  return e;
}

const std::string& RequestTracer::token_text(std::int32_t token_id) {
  auto [it, inserted] = token_texts_.try_emplace(token_id);
  if (inserted) {
    it->second =
        tokenizer_.decode(std::span(&token_id, 1), DecodeOptions{.skip_special_tokens = false});
  }
  return it->second;
}

void RequestTracer::admitted(std::int32_t slot, const std::string& request_id, bool traced,
                             std::int64_t num_prompt_tokens, double now) {
  PAGODA_CHECK(slot >= 0 && !is_traced(slot)) << "slot " << slot << " is not free";
  if (!sink_ || !traced) return;
  CostTimer timer(seconds_spent_);
  if (static_cast<std::size_t>(slot) >= traced_.size()) traced_.resize(slot + 1);
  Traced& t = traced_[static_cast<std::size_t>(slot)];
  t = {.request_id = request_id, .num_prompt_tokens = num_prompt_tokens};
  ++num_traced_;
  trace::TraceEvent e = event(trace::TraceEventKind::kAdmitted, t, now);
  e.num_prompt_tokens = num_prompt_tokens;
  emit(e);
}

void RequestTracer::begin_step(std::int64_t step, std::int64_t batch_size) {
  step_ = step;
  batch_size_ = batch_size;
}

void RequestTracer::scheduled(const SchedulerOutput& output, const Scheduler& scheduler,
                              double now) {
  if (num_traced_ == 0) return;
  CostTimer timer(seconds_spent_);
  for (const std::int32_t slot : output.preempted_slots) {
    const Traced* t = find(slot);
    if (t == nullptr) continue;
    trace::TraceEvent e = event(trace::TraceEventKind::kPreempted, *t, now);
    if (const Request* r = scheduler.find_request(t->request_id)) {
      e.num_output_tokens = r->num_output_tokens();
    }
    emit(e);
  }
  for (const ScheduledRequest& s : output.requests) {
    const Traced* t = find(s.slot);
    if (t == nullptr) continue;
    const Request* r = scheduler.find_request(s.request_id);
    const std::int64_t num_outputs = r != nullptr ? r->num_output_tokens() : 0;
    if (s.is_new && !s.resumed_from_preemption) {  // its first step since admission
      trace::TraceEvent e = event(trace::TraceEventKind::kScheduled, *t, now);
      e.num_prompt_tokens = t->num_prompt_tokens;
      e.num_cached_tokens = s.num_computed_tokens;  // a fresh request starts at its cache hit
      emit(e);
    } else if (s.resumed_from_preemption) {
      trace::TraceEvent e = event(trace::TraceEventKind::kResumed, *t, now);
      e.num_output_tokens = num_outputs;
      emit(e);
    }
    // Known tokens are prompt + outputs; a step that computes any but the newest is (re)filling.
    const std::int64_t known = t->num_prompt_tokens + num_outputs;
    if (s.num_computed_tokens < known - 1 || s.num_computed_tokens < t->num_prompt_tokens) {
      trace::TraceEvent e = event(trace::TraceEventKind::kPrefillChunk, *t, now);
      e.num_chunk_tokens = s.num_scheduled_tokens();
      e.num_computed_tokens = s.num_computed_tokens + s.num_scheduled_tokens();
      e.num_prompt_tokens = t->num_prompt_tokens;
      emit(e);
    }
  }
}

void RequestTracer::token(std::int32_t slot, std::int64_t index, std::int32_t token_id,
                          const sampling::SampledLogprobs* logprobs, double now) {
  const Traced* t = find(slot);
  if (t == nullptr) return;
  CostTimer timer(seconds_spent_);
  trace::TraceEvent e = event(trace::TraceEventKind::kToken, *t, now);
  e.index = index;
  e.token_id = token_id;
  e.text = token_text(token_id);
  e.batch_size = batch_size_;
  if (logprobs != nullptr) {
    e.logprob = logprobs->logprob;
    const std::size_t n = std::min(logprobs->top.size(), static_cast<std::size_t>(top_n_));
    e.alternatives.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& [id, lp] = logprobs->top[i];
      e.alternatives.push_back({id, token_text(id), lp});
    }
  }
  emit(e);
}

void RequestTracer::speculation(std::int32_t slot, std::int64_t index, std::int64_t num_drafts,
                                std::int64_t num_accepted, double now) {
  const Traced* t = find(slot);
  if (t == nullptr) return;
  CostTimer timer(seconds_spent_);
  trace::TraceEvent e = event(trace::TraceEventKind::kSpeculation, *t, now);
  e.index = index;
  e.num_draft_tokens = num_drafts;
  e.num_accepted_tokens = num_accepted;
  emit(e);
}

void RequestTracer::reasoning_start(std::int32_t slot, std::int64_t index, double now) {
  const Traced* t = find(slot);
  if (t == nullptr) return;
  CostTimer timer(seconds_spent_);
  trace::TraceEvent e = event(trace::TraceEventKind::kReasoningStart, *t, now);
  e.index = index;
  emit(e);
}

void RequestTracer::reasoning_end(std::int32_t slot, std::int64_t index, std::int64_t num_tokens,
                                  bool forced, double now) {
  const Traced* t = find(slot);
  if (t == nullptr) return;
  CostTimer timer(seconds_spent_);
  trace::TraceEvent e = event(trace::TraceEventKind::kReasoningEnd, *t, now);
  e.index = index;
  e.num_reasoning_tokens = num_tokens;
  e.forced = forced;
  emit(e);
}

void RequestTracer::finished(std::int32_t slot, const RequestOutput& output, double now) {
  const Traced* t = find(slot);
  if (t == nullptr) return;
  CostTimer timer(seconds_spent_);
  trace::TraceEvent e = event(trace::TraceEventKind::kFinished, *t, now);
  e.finish_reason = std::string(output.finish_reason());
  e.num_prompt_tokens = output.usage.num_prompt_tokens;
  e.num_cached_tokens = output.usage.num_cached_prompt_tokens;
  e.num_output_tokens = output.usage.num_completion_tokens;
  e.num_reasoning_tokens = output.usage.num_reasoning_tokens;
  e.queue_time = output.timings.queue_time();
  e.time_to_first_token = output.timings.time_to_first_token();
  e.end_to_end_latency = output.timings.end_to_end_latency();
  emit(e);
}

void RequestTracer::release(std::int32_t slot) {
  if (find(slot) == nullptr) return;
  traced_[static_cast<std::size_t>(slot)] = Traced{};
  --num_traced_;
}

trace::TraceSinkStats RequestTracer::sink_stats() const {
  return sink_ ? sink_->stats() : trace::TraceSinkStats{};
}

}  // namespace pagoda::engine
