#include "engine/engine_core.h"

#include <exception>
#include <utility>

#include "common/check.h"

namespace pagoda::engine {

namespace {

// The final output of a request the loop never registered (it arrived after the loop ended).
RequestOutput unregistered_final(const EngineCoreRequest& request) {
  RequestOutput out;
  out.request_id = request.request_id;
  out.finished = true;
  out.status = RequestStatus::kFinishedAborted;
  out.usage.num_prompt_tokens = static_cast<std::int64_t>(request.prompt_token_ids.size());
  return out;
}

Status engine_stopped() {
  return {StatusCode::kUnavailable, "the engine shut down before the request finished"};
}

}  // namespace

StatusOr<std::unique_ptr<EngineCore>> EngineCore::create(
    const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
    std::shared_ptr<const Tokenizer> tokenizer) {
  PAGODA_CHECK(executor != nullptr && tokenizer != nullptr) << "executor and tokenizer required";
  PAGODA_RETURN_IF_ERROR(config.scheduler.validate(config.cache));
  PAGODA_RETURN_IF_ERROR(
      executor->allocate_kv_cache(config.cache.num_blocks, config.cache.block_size));
  std::unique_ptr<Speculator> speculator;
  if (config.speculative) {
    PAGODA_ASSIGN_OR_RETURN(
        speculator,
        Speculator::create(*config.speculative, config.draft_executor, executor->info().vocab_size,
                           config.cache.block_size, config.cache.num_blocks));
  }
  std::unique_ptr<EngineCore> core(
      new EngineCore(config, std::move(executor), std::move(tokenizer)));
  core->speculator_ = std::move(speculator);
  core->publish_stats();
  {
    std::lock_guard lock(core->mutex_);
    core->stats_.running = true;
  }
  core->thread_ = std::thread([raw = core.get()] { raw->run(); });
  return core;
}

EngineCore::EngineCore(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor,
                       std::shared_ptr<const Tokenizer> tokenizer)
    : config_(config),
      executor_(std::move(executor)),
      tokenizer_(std::move(tokenizer)),
      scheduler_(config.scheduler, config.cache),
      runner_(*executor_, config.cache.block_size),
      outputs_(*tokenizer_),
      tracer_(config.trace_sink, config.trace_top_n, *tokenizer_,
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                  .count()),
      start_time_(std::chrono::steady_clock::now()) {
  if (config_.reasoning) {
    // The end tag as the model would spell it; a special token (Qwen3's </think>) is one id.
    end_tag_ids_ = tokenizer_->encode(config_.reasoning->end,
                                      {.add_special_tokens = false, .parse_special = true});
  }
}

EngineCore::~EngineCore() {
  shutdown(/*drain=*/false);
}

double EngineCore::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
}

void EngineCore::add_request(EngineCoreRequest request) {
  {
    std::lock_guard lock(mutex_);
    if (!stats_.running) {
      // The loop is gone: the request still gets its one final output.
      request.channel->push({request.index, unregistered_final(request), engine_stopped()});
      return;
    }
    commands_.push_back({Command::Kind::kAdd, std::move(request)});
  }
  wake_.notify_one();
}

void EngineCore::abort_request(std::string request_id) {
  {
    std::lock_guard lock(mutex_);
    Command& command = commands_.emplace_back();
    command.kind = Command::Kind::kAbort;
    command.request.request_id = std::move(request_id);
  }
  wake_.notify_one();
}

void EngineCore::shutdown(bool drain) {
  {
    std::lock_guard lock(mutex_);
    if (!stop_requested_) drain_ = drain;
    stop_requested_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

EngineStats EngineCore::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void EngineCore::run() {
  while (wait_for_work()) {
    if (!scheduler_.has_unfinished_requests()) continue;
    try {
      step();
    } catch (const std::exception& e) {
      // Last resort (allocation failure): nothing may escape the loop, and no request may be
      // left without a final output.
      const Status error = internal_error(std::string("engine step failed: ") + e.what());
      std::vector<std::string> ids;
      for (const auto& [id, live] : live_) ids.push_back(id);
      for (const std::string& id : ids) abort(id, error);
      scheduler_.reset_prefix_cache();
    }
    ++num_steps_;
    publish_stats();
  }
}

// Applies queued commands; sleeps while there is nothing to do. False once the loop must end,
// after every live request got its final output.
bool EngineCore::wait_for_work() {
  std::vector<Command> commands;
  bool stop = false;
  bool drain = false;
  {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] {
      return !commands_.empty() || stop_requested_ || scheduler_.has_unfinished_requests();
    });
    commands.swap(commands_);
    stop = stop_requested_;
    drain = drain_;
  }
  for (Command& command : commands) apply(command);
  if (!commands.empty()) publish_stats();
  if (!stop || (drain && scheduler_.has_unfinished_requests())) return true;

  std::vector<std::string> ids;
  for (const auto& [id, live] : live_) ids.push_back(id);
  for (const std::string& id : ids) abort(id, engine_stopped());
  std::vector<Command> late;
  {
    std::lock_guard lock(mutex_);
    stats_.running = false;
    late.swap(commands_);
  }
  for (Command& command : late) {
    if (command.kind != Command::Kind::kAdd) continue;
    command.request.channel->push(
        {command.request.index, unregistered_final(command.request), engine_stopped()});
  }
  publish_stats();
  return false;
}

void EngineCore::apply(Command& command) {
  if (command.kind == Command::Kind::kAbort) {
    abort(command.request.request_id, Status::ok_status());
  } else {
    add(command.request);
  }
}

void EngineCore::add(EngineCoreRequest& r) {
  if (r.output.reasoning) {
    r.output.reasoning_starts_inside =
        ends_inside_span(tokenizer_->decode(r.prompt_token_ids, {.skip_special_tokens = false}),
                         *r.output.reasoning);
  }
  Status status = outputs_.add_request(r.request_id, r.output,
                                       static_cast<std::int64_t>(r.prompt_token_ids.size()),
                                       r.options.arrival_time);
  if (!status.ok()) {
    r.channel->push({r.index, unregistered_final(r), status});
    return;
  }
  live_[r.request_id] = {r.index, r.channel, r.sampling.logprobs};
  tracer_.admitted(r.request_id, r.traced, static_cast<std::int64_t>(r.prompt_token_ids.size()),
                   now());
  if (r.output.reasoning_starts_inside) tracer_.reasoning_start(r.request_id, 0, now());
  if (r.max_reasoning_tokens) {
    ReasoningBudget& budget = budgets_[r.request_id];
    budget.max_tokens = *r.max_reasoning_tokens;
    // A zero budget in a span the prompt opened: the very first tokens close it.
    if (budget.max_tokens == 0 && r.output.reasoning_starts_inside) {
      budget.spent = true;
      budget.forced.assign(end_tag_ids_.begin(), end_tag_ids_.end());
    }
  }
  std::vector<std::int32_t> stop_ids = r.options.stop_token_ids;
  if (r.options.eos_token_id && !r.options.ignore_eos) stop_ids.push_back(*r.options.eos_token_id);
  // A trace wants the alternatives even when the client does not; emit() trims them back.
  // When the client asked for none, computing them is all tracing cost.
  const std::int64_t trace_top_n = tracer_.top_n_for(r.request_id);
  const bool logprobs_for_trace_only = trace_top_n > 0 && !r.sampling.logprobs;
  if (trace_top_n > 0 && r.sampling.logprobs.value_or(-1) < trace_top_n) {
    r.sampling.logprobs = trace_top_n;
  }
  sampler_.add(r.request_id, r.sampling, r.prompt_token_ids, std::move(stop_ids),
               logprobs_for_trace_only);
  // Logprobs come one row per token and a budget forces tokens: those requests never draft.
  if (speculator_ && !r.sampling.logprobs && !r.max_reasoning_tokens) {
    speculator_->add(r.request_id, r.sampling);
  }
  status = scheduler_.add_request(
      std::make_unique<Request>(r.request_id, std::move(r.prompt_token_ids), r.options));
  if (!status.ok()) abort(r.request_id, status);
}

void EngineCore::abort(std::string_view request_id, const Status& error) {
  scheduler_.abort_request(request_id);
  if (std::optional<RequestOutput> out = outputs_.abort(request_id, now())) {
    deliver(std::move(*out), error);
  }
  forget_sampling(request_id);
}

// The five parts of a step; each callee hides its own bookkeeping.
void EngineCore::step() {
  if (speculator_) speculator_->propose(scheduler_);
  const SchedulerOutput scheduled = scheduler_.schedule();
  outputs_.record_scheduled(scheduled, now());
  tracer_.begin_step(num_steps_ + 1, static_cast<std::int64_t>(scheduled.requests.size()));
  tracer_.scheduled(scheduled, scheduler_, now());
  if (Status s = runner_.execute(scheduled); !s.ok()) return fail_step(scheduled, s);
  const SampledTokens sampled = sample(scheduled);
  emit(scheduler_.update_from_output(scheduled, sampled));
}

SampledTokens EngineCore::sample(const SchedulerOutput& scheduled) {
  const std::size_t n = scheduled.requests.size();
  SampledTokens sampled;
  sampled.token_ids.resize(n);
  step_logprobs_.resize(n);
  step_index_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledRequest& s = scheduled.requests[i];
    step_logprobs_[i].reset();
    if (!s.needs_sample) continue;
    std::int32_t token;
    const auto budget = budgets_.empty() ? budgets_.end() : budgets_.find(s.request_id);
    if (s.num_spec_tokens > 0) {
      std::vector<std::int32_t> verified =
          speculator_->verify(s, runner_.logits_for(i), sampler_.sampler(s.request_id));
      step_index_[s.request_id] = i;
      if (tracer_.is_traced(s.request_id)) {
        const Request* request = scheduler_.find_request(s.request_id);
        const std::int64_t index = request != nullptr ? request->num_output_tokens() : 0;
        tracer_.speculation(s.request_id, index, s.num_spec_tokens,
                            static_cast<std::int64_t>(verified.size()) - 1, now());
        for (std::size_t t = 0; t < verified.size(); ++t) {
          tracer_.token(s.request_id, index + static_cast<std::int64_t>(t), verified[t], nullptr,
                        now());
        }
      }
      sampled.token_ids[i] = std::move(verified);
      continue;
    }
    if (budget != budgets_.end() && !budget->second.forced.empty()) {
      token = budget->second.forced.front();
      budget->second.forced.pop_front();
      sampler_.force(s.request_id, runner_.logits_for(i), token, step_logprobs_[i]);
    } else {
      token = sampler_.sample(s.request_id, runner_.logits_for(i), step_logprobs_[i]);
    }
    sampled.token_ids[i].push_back(token);
    step_index_[s.request_id] = i;
    if (tracer_.is_traced(s.request_id)) {
      const Request* request = scheduler_.find_request(s.request_id);
      tracer_.token(s.request_id, request != nullptr ? request->num_output_tokens() : 0, token,
                    step_logprobs_[i] ? &*step_logprobs_[i] : nullptr, now());
    }
  }
  return sampled;
}

void EngineCore::emit(const std::vector<RequestUpdate>& updates) {
  std::vector<std::vector<TokenLogprobs>> logprobs(updates.size());
  for (std::size_t u = 0; u < updates.size(); ++u) {
    num_generated_tokens_ += static_cast<std::int64_t>(updates[u].new_token_ids.size());
    const auto it = step_index_.find(updates[u].request_id);
    if (it == step_index_.end() || !step_logprobs_[it->second]) continue;
    // Only what the client asked for: a trace may have made the sampler compute more.
    const auto live = live_.find(updates[u].request_id);
    if (live == live_.end() || !live->second.client_logprobs) continue;
    sampling::SampledLogprobs& lp = *step_logprobs_[it->second];
    const auto keep = static_cast<std::size_t>(*live->second.client_logprobs);
    if (lp.top.size() > keep) lp.top.resize(keep);
    logprobs[u].push_back({lp.token_id, lp.logprob, std::move(lp.top)});
  }
  ProcessedOutputs result = outputs_.process(updates, now(), logprobs);
  follow_reasoning(result.reasoning);
  for (RequestOutput& out : result.outputs) deliver(std::move(out));
  // A stop string ended these in text; the client has its final output, the scheduler must
  // still free their blocks.
  for (const std::string& id : result.requests_to_abort) {
    scheduler_.abort_request(id);
    forget_sampling(id);
  }
}

// Trace events for spans that opened or closed, and budgets: once a request has spent its
// reasoning tokens inside an open span, its next tokens are the end tag.
void EngineCore::follow_reasoning(const std::vector<ReasoningProgress>& progress) {
  for (const ReasoningProgress& p : progress) {
    const auto budget = budgets_.find(p.request_id);
    if (p.opened) tracer_.reasoning_start(p.request_id, p.num_output_tokens, now());
    if (p.closed) {
      const bool forced = budget != budgets_.end() && budget->second.spent;
      tracer_.reasoning_end(p.request_id, p.num_output_tokens, p.num_reasoning_tokens, forced,
                            now());
    }
    if (budget == budgets_.end()) continue;
    ReasoningBudget& b = budget->second;
    if (p.inside && !b.spent && p.num_reasoning_tokens >= b.max_tokens) {
      b.spent = true;
      b.forced.assign(end_tag_ids_.begin(), end_tag_ids_.end());
    }
  }
}

// The step's blocks were keyed when scheduled, but their K/V may never have been written: fail
// its requests, then drop every key. Resetting needs every block free, so requests that hold
// blocks without being in this step fail too (rare: only when the budget left them out).
void EngineCore::fail_step(const SchedulerOutput& scheduled, const Status& error) {
  ++num_failed_steps_;
  for (const ScheduledRequest& s : scheduled.requests) abort(s.request_id, error);
  std::vector<std::string> holding;
  for (std::size_t i = 0; i < scheduler_.running().size(); ++i) {
    holding.push_back(scheduler_.running()[i]->request_id());
  }
  for (const std::string& id : holding) abort(id, error);
  PAGODA_CHECK(scheduler_.reset_prefix_cache()) << "blocks still in use after a failed step";
}

void EngineCore::deliver(RequestOutput output, Status error) {
  const auto it = live_.find(output.request_id);
  PAGODA_CHECK(it != live_.end()) << "output for unknown request " << output.request_id;
  const bool finished = output.finished;
  if (finished) tracer_.finished(output, now());
  it->second.channel->push({it->second.index, std::move(output), std::move(error)});
  if (finished) {
    forget_sampling(it->first);
    live_.erase(it);
  }
}

void EngineCore::forget_sampling(std::string_view request_id) {
  sampler_.remove(request_id);
  if (speculator_) speculator_->remove(request_id);
  if (const auto it = budgets_.find(request_id); it != budgets_.end()) budgets_.erase(it);
}

void EngineCore::publish_stats() {
  const SchedulerStats s = scheduler_.stats();
  std::lock_guard lock(mutex_);
  stats_.num_running = s.num_running;
  stats_.num_waiting = s.num_waiting;
  stats_.kv_cache_usage = s.kv_cache_usage;
  stats_.num_kv_blocks = config_.cache.num_blocks;
  stats_.num_preemptions = s.num_preemptions;
  stats_.prefix_cache_queries = s.prefix_cache.queries;
  stats_.prefix_cache_hits = s.prefix_cache.hits;
  stats_.num_steps = num_steps_;
  stats_.num_failed_steps = num_failed_steps_;
  stats_.num_generated_tokens = num_generated_tokens_;
  if (speculator_) stats_.spec_decode = speculator_->stats();
  const trace::TraceSinkStats trace = tracer_.sink_stats();
  stats_.trace_events_written = trace.events_written;
  stats_.trace_events_dropped = trace.events_dropped;
  stats_.trace_bytes_written = trace.bytes_written;
  stats_.trace_seconds = tracer_.seconds_spent() + sampler_.trace_logprob_seconds();
}

}  // namespace pagoda::engine
