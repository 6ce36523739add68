#include "engine/engine_core.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <random>
#include <utility>

#include "common/check.h"
#include "sampling/random_draw.h"
#include "sampling/sampling_rows.h"

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
      config.cache.sliding_windows.empty()
          ? executor->allocate_kv_cache(config.cache.num_blocks, config.cache.block_size)
          : executor->allocate_kv_cache_groups(config.cache.num_blocks, config.cache.block_size));
  std::unique_ptr<Speculator> speculator;
  if (config.speculative) {
    PAGODA_ASSIGN_OR_RETURN(
        speculator,
        Speculator::create(*config.speculative, config.draft_executor, executor->info().vocab_size,
                           config.cache.block_size, config.cache.num_blocks,
                           config.disable_hybrid_kv_cache_manager));
  }
  std::unique_ptr<EngineCore> core(
      new EngineCore(config, std::move(executor), std::move(tokenizer)));
  core->speculator_ = std::move(speculator);
  // Drafts are proposed from each step's tokens, so speculation keeps the synchronous loop.
  core->overlap_ = config.async_scheduling && core->speculator_ == nullptr;
  if (config.step_time_target_seconds > 0.0 && !core->overlap_) {
    core->step_budget_.emplace(config.step_time_target_seconds, kMinStepBudgetTokens,
                               config.scheduler.max_num_batched_tokens);
  }
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
      runner_(*executor_, config.cache.block_size, config.cache.sliding_windows),
      outputs_(*tokenizer_),
      tracer_(config.trace_sink, config.trace_top_n, *tokenizer_,
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                  .count()),
      start_time_(std::chrono::steady_clock::now()) {
  if (config_.seed) {
    server_seed_ = *config_.seed;
  } else {
    std::random_device device;
    server_seed_ = (std::uint64_t{device()} << 32) ^ device();
  }
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
    if (!scheduler_.has_unfinished_requests() && !in_flight_) {
      gap_start_.reset();  // idle: the next launch has no gap to count
      continue;
    }
    try {
      step();
    } catch (const std::exception& e) {
      // Last resort (allocation failure): nothing may escape the loop, and no request may be
      // left without a final output.
      wait_for_constraint_masks();
      drop_in_flight();
      abort_all(internal_error(std::string("engine step failed: ") + e.what()));
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
      return !commands_.empty() || stop_requested_ || scheduler_.has_unfinished_requests() ||
             in_flight_;
    });
    commands.swap(commands_);
    stop = stop_requested_;
    drain = drain_;
  }
  for (Command& command : commands) apply(command);
  if (!commands.empty()) publish_stats();
  if (!stop || (drain && scheduler_.has_unfinished_requests())) return true;

  finish_in_flight();
  abort_all(engine_stopped());
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
    // Unknown or finished ids are ignored.
    const auto it = slot_of_.find(command.request.request_id);
    if (it != slot_of_.end()) abort(it->second, Status::ok_status());
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
  if (slot_of_.contains(r.request_id)) {
    r.channel->push({r.index, unregistered_final(r),
                     invalid_argument("request id '" + r.request_id + "' is already in use")});
    return;
  }
  const std::int32_t slot = slots_.acquire();
  Status status = outputs_.add_request(slot, r.request_id, r.output,
                                       static_cast<std::int64_t>(r.prompt_token_ids.size()),
                                       r.options.arrival_time);
  if (!status.ok()) {
    slots_.release(slot);  // nothing holds it yet
    r.channel->push({r.index, unregistered_final(r), status});
    return;
  }
  if (static_cast<std::size_t>(slot) >= live_.size()) {
    live_.resize(slot + 1);
    slot_last_step_.resize(slot + 1, 0);
  }
  LiveRequest& l = live(slot);
  l.request_id = r.request_id;
  l.index = r.index;
  l.channel = r.channel;
  slot_of_[r.request_id] = slot;

  std::vector<std::int32_t> stop_ids = r.options.stop_token_ids;
  if (r.options.eos_token_id && !r.options.ignore_eos) stop_ids.push_back(*r.options.eos_token_id);
  tracer_.admitted(slot, r.request_id, r.traced,
                   static_cast<std::int64_t>(r.prompt_token_ids.size()), now());
  if (r.output.reasoning_starts_inside) tracer_.reasoning_start(slot, 0, now());
  // A trace wants the alternatives even when the client does not; the output processor trims
  // them back to the client's number.
  const std::int64_t trace_top_n = tracer_.top_n_for(slot);
  std::optional<std::int64_t> num_logprobs = r.sampling.logprobs;
  if (trace_top_n > 0 && num_logprobs.value_or(-1) < trace_top_n) num_logprobs = trace_top_n;

  const std::uint64_t seed =
      r.sampling.seed ? *r.sampling.seed : sampling::mix64(server_seed_ + num_unseeded_++);
  l.row = sampling::sampling_row(r.sampling, slot, seed,
                                 num_logprobs ? static_cast<std::int32_t>(*num_logprobs) : -1);
  if (status = executor_->open_sampling_slot(
          slot, sampling::slot_sampling_config(r.sampling, r.prompt_token_ids, stop_ids));
      !status.ok()) {
    abort(slot, status);
    return;
  }

  if (r.max_reasoning_tokens) {
    // Not emplace(): Clang 14 takes a nested struct with member initializers for one that is not
    // default-constructible (the fuzzers' build).
    ReasoningBudget& budget = l.budget.emplace(ReasoningBudget{});
    budget.max_tokens = *r.max_reasoning_tokens;
    // A zero budget in a span the prompt opened: the very first tokens close it.
    if (budget.max_tokens == 0 && r.output.reasoning_starts_inside) {
      budget.spent = true;
      budget.forced.assign(end_tag_ids_.begin(), end_tag_ids_.end());
    }
  }
  if (r.sampling.prompt_logprobs) {
    runner_.score_prompt(slot, r.prompt_token_ids,
                         static_cast<std::int32_t>(*r.sampling.prompt_logprobs));
    r.options.skip_prefix_cache_hits = true;
    r.options.scores_prompt = true;
  }
  if (r.constraint) {
    if (stop_ids.empty()) {
      abort(slot, invalid_argument("a structured output needs a stop token to end on: leave "
                                   "ignore_eos off or give stop_token_ids"));
      return;
    }
    // A prompt that opened a thinking span: the constraint starts after its end tag.
    std::optional<std::string> end_tag;
    if (r.output.reasoning && r.output.reasoning_starts_inside) end_tag = r.output.reasoning->end;
    l.constraint = std::make_unique<RequestConstraint>(r.constraint, stop_ids, std::move(end_tag));
  }
  // Logprobs come one row per token and a budget forces tokens: those requests never draft
  // (nor do those scoring their prompt: keep verification rows and prompt rows apart; nor
  // constrained ones, whose masks follow one token at a time).
  if (speculator_ && !num_logprobs && !r.sampling.prompt_logprobs && !r.max_reasoning_tokens &&
      !r.constraint) {
    speculator_->add(slot, r.sampling, r.prompt_token_ids, stop_ids);
    l.drafts = true;
  }
  auto request = std::make_unique<Request>(r.request_id, std::move(r.prompt_token_ids), r.options);
  request->set_slot(slot);
  // A budget's forced tokens depend on the text so far, a constraint's mask on the tokens so
  // far: such a request waits for its tokens.
  request->set_schedules_ahead(overlap_ && !r.max_reasoning_tokens && !r.constraint);
  status = scheduler_.add_request(std::move(request));
  if (!status.ok()) abort(slot, status);
}

void EngineCore::abort(std::int32_t slot, const Status& error) {
  const LiveRequest& l = live(slot);
  if (l.request_id.empty()) return;
  scheduler_.abort_request(l.request_id);
  if (std::optional<RequestOutput> out = outputs_.abort(slot, now())) {
    deliver(slot, std::move(*out), error);  // releases the slot
  } else {
    // Its final output was made but never delivered (a step that threw midway).
    release_slot(slot);
  }
}

void EngineCore::abort_all(const Status& error) {
  for (std::size_t slot = 0; slot < live_.size(); ++slot) {
    abort(static_cast<std::int32_t>(slot), error);
  }
}

// The five calls of a step; each callee hides its own bookkeeping.
void EngineCore::step() {
  if (overlap_) return overlapped_step();
  if (speculator_) speculator_->propose(scheduler_);
  if (step_budget_)
    scheduler_.set_step_token_budget(step_budget_->budget(scheduler_.num_running()));
  const SchedulerOutput scheduled = scheduler_.schedule();
  SampledTokens sampled;
  if (!execute(scheduled, sampled)) return;
  emit(scheduler_.update_from_output(scheduled, sampled));
}

// Step N+1 is planned and launched while N may still run; then N is collected and processed:
//
//   schedule N+1   requests whose N token is in flight run it as a placeholder
//   launch N+1     the device queues it behind N
//   complete N     tokens of N appended, stop checks, outputs; a request that ends here
//                  keeps its slot and blocks until N+1 is collected (its N+1 row is dropped)
void EngineCore::overlapped_step() {
  SchedulerOutput next = scheduler_.schedule();
  for (const ScheduledRequest& s : next.requests) {
    slot_last_step_[static_cast<std::size_t>(s.slot)] = next.step_id;
  }
  prepare(next);  // while every request in `next` is still live
  // A preemption freed blocks that `next` may reuse while the step in flight still writes them.
  if (!next.preempted_slots.empty() && in_flight_) {
    const std::int64_t num_failed = num_failed_steps_;
    finish_in_flight();
    if (num_failed_steps_ != num_failed) return;  // it failed, and every request in `next` too
  }
  std::optional<InFlightStep> previous = std::exchange(in_flight_, std::nullopt);
  bool launched = false;
  begin_launch();
  Status status = runner_.launch(&launched);
  wait_for_constraint_masks();
  if (launched && status.ok()) {
    end_launch();
    in_flight_ = InFlightStep{std::move(next), runner_.first_rows(), runner_.prompt_rows()};
  }
  if (previous) complete(*previous);
  if (!status.ok()) fail_step(next, status);
}

void EngineCore::prepare(const SchedulerOutput& scheduled) {
  outputs_.record_scheduled(scheduled, now());
  tracer_.begin_step(num_steps_ + 1, static_cast<std::int64_t>(scheduled.requests.size()));
  tracer_.scheduled(scheduled, scheduler_, now());
  runner_.prepare(scheduled);
  fill_sampling_rows(scheduled);
}

bool EngineCore::execute(const SchedulerOutput& scheduled, SampledTokens& sampled) {
  for (const ScheduledRequest& s : scheduled.requests) {
    slot_last_step_[static_cast<std::size_t>(s.slot)] = scheduled.step_id;
  }
  prepare(scheduled);
  begin_launch();
  const auto run_start = std::chrono::steady_clock::now();
  Status run_status = runner_.run();
  wait_for_constraint_masks();  // the executor waited already, unless the step failed early
  if (!run_status.ok()) {
    fail_step(scheduled, run_status);
    return false;
  }
  if (step_budget_) {
    step_budget_->observe(
        scheduled.total_num_scheduled_tokens,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count());
  }
  end_launch();
  step_done(scheduled.step_id);
  collect(scheduled, runner_.first_rows(), runner_.prompt_rows(), runner_.step_output(), sampled);
  return true;
}

void EngineCore::complete(const InFlightStep& step) {
  const auto wait_start = std::chrono::steady_clock::now();
  Status status = runner_.collect(collected_);
  gap_waited_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  if (!status.ok()) {
    fail_step(step.scheduled, status);
    return;
  }
  SampledTokens sampled;
  collect(step.scheduled, step.first_row, step.prompt_rows, collected_, sampled);
  emit(scheduler_.update_from_output(step.scheduled, sampled));
  step_done(step.scheduled.step_id);
}

void EngineCore::finish_in_flight() {
  if (!in_flight_) return;
  const InFlightStep step = std::move(*in_flight_);
  in_flight_.reset();
  complete(step);
}

void EngineCore::drop_in_flight() {
  if (!in_flight_) return;
  StepOutput unused;
  (void)runner_.collect(unused);  // its error, if any, changes nothing: the step is dropped
  const std::int64_t step_id = in_flight_->scheduled.step_id;
  in_flight_.reset();
  scheduler_.step_done(step_id);
  step_done(step_id);
}

void EngineCore::step_done(std::int64_t step_id) {
  done_step_id_ = std::max(done_step_id_, step_id);
  std::erase_if(deferred_slots_, [this](std::int32_t slot) {
    if (slot_last_step_[static_cast<std::size_t>(slot)] > done_step_id_) return false;
    free_slot(slot);
    return true;
  });
}

void EngineCore::begin_launch() {
  if (!gap_start_ || runner_.batch().num_tokens() == 0) return;
  const double gap =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - *gap_start_).count();
  host_gap_.add(std::max(0.0, gap - gap_waited_seconds_));
}

void EngineCore::end_launch() {
  if (runner_.batch().num_tokens() == 0) return;
  gap_start_ = std::chrono::steady_clock::now();
  gap_waited_seconds_ = 0.0;
}

void EngineCore::HostGapHistogram::add(double seconds) {
  ++steps;
  total_seconds += seconds;
  // Bucket b holds [1us * 1.05^b, 1us * 1.05^(b+1)); the first also everything below.
  const double b = seconds > 1e-6 ? std::log(seconds / 1e-6) / std::log(1.05) : 0.0;
  counts[std::clamp(static_cast<int>(b), 0, kBuckets - 1)] += 1;
}

HostGapStats EngineCore::HostGapHistogram::stats() const {
  HostGapStats s{.steps = steps, .total_seconds = total_seconds};
  std::int64_t seen = 0;
  for (int b = 0; b < kBuckets && steps > 0; ++b) {
    seen += counts[b];
    if (2 * seen >= steps) {
      s.p50_seconds = 1e-6 * std::pow(1.05, b + 0.5);
      break;
    }
  }
  return s;
}

// Each sampling row is its request's settings plus this step's draw position, a forced token
// while a spent reasoning budget closes its span, and for drafts a request for the raw logits.
void EngineCore::fill_sampling_rows(const SchedulerOutput& scheduled) {
  for (std::size_t i = 0; i < scheduled.requests.size(); ++i) {
    const ScheduledRequest& s = scheduled.requests[i];
    const std::span<SamplingRow> rows = runner_.rows_for(i);
    if (rows.empty()) continue;
    LiveRequest& l = live(s.slot);
    const std::int64_t position = s.output_index;
    for (std::size_t j = 0; j < rows.size(); ++j) {
      SamplingRow& row = rows[j];
      row = l.row;
      row.position = position + static_cast<std::int64_t>(j);
      row.return_logits = s.num_spec_tokens > 0;
    }
    if (l.budget && !l.budget->forced.empty() && s.num_spec_tokens == 0) {
      rows[0].forced_token = l.budget->forced.front();
    }
  }
  fill_constraint_masks(scheduled);
}

// The step's tokens by scheduled request: the executor's sample, or for drafts the verifier's
// answer over the raw logits (then the executor's penalty counts learn the accepted tokens).
void EngineCore::collect(const SchedulerOutput& scheduled, std::span<const std::int32_t> first_row,
                         std::span<const ModelRunner::PromptRows> prompt_rows,
                         const StepOutput& out, SampledTokens& sampled) {
  // Prompt scoring rows: each is reduced to (the prompt token's logprob, top-N) by the executor,
  // so only those travel; the request's list grows chunk by chunk.
  for (const ModelRunner::PromptRows& p : prompt_rows) {
    LiveRequest& l = live(p.slot);
    if (l.request_id != scheduled.requests[p.request].request_id) continue;
    for (std::int32_t k = 0; k < p.num_rows; ++k) {
      const SampledLogprobs& lp = out.logprobs[static_cast<std::size_t>(p.first_row + k)];
      l.prompt_logprobs.push_back({lp.token_id, lp.logprob, lp.top, lp.rank});
    }
  }
  const std::size_t n = scheduled.requests.size();
  sampled.token_ids.resize(n);
  if (step_logprobs_.size() < live_.size()) step_logprobs_.resize(live_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledRequest& s = scheduled.requests[i];
    step_logprobs_[static_cast<std::size_t>(s.slot)] = nullptr;
    const std::int32_t row = first_row[i];
    if (row < 0) continue;
    const auto r = static_cast<std::size_t>(row);
    LiveRequest& l = live(s.slot);
    // Ended after this step was launched (overlapped steps): its token is dropped. Its slot was
    // not handed out again meanwhile, so the live request there is still it or none.
    if (l.request_id != s.request_id) continue;
    const std::int64_t index = s.output_index;
    if (s.num_spec_tokens > 0) {
      const std::size_t vocab = static_cast<std::size_t>(out.vocab_size);
      const std::span<const float> logits(
          out.logits(r).data(), (1 + static_cast<std::size_t>(s.num_spec_tokens)) * vocab);
      std::vector<std::int32_t> verified = speculator_->verify(s, logits);
      executor_->accept_tokens(s.slot, verified);
      if (tracer_.is_traced(s.slot)) {
        tracer_.speculation(s.slot, index, s.num_spec_tokens,
                            static_cast<std::int64_t>(verified.size()) - 1, now());
        for (std::size_t t = 0; t < verified.size(); ++t) {
          tracer_.token(s.slot, index + static_cast<std::int64_t>(t), verified[t], nullptr, now());
        }
      }
      sampled.token_ids[i] = std::move(verified);
      continue;
    }
    const std::int32_t token = out.token_ids[r];
    // A failed constraint ends the request after this step, without this token.
    if (!follow_constraint(s.slot, token)) continue;
    if (l.budget && !l.budget->forced.empty()) l.budget->forced.pop_front();
    if (l.drafts) speculator_->accept(s.slot, token);
    sampled.token_ids[i].assign(1, token);
    const SampledLogprobs* logprobs = l.row.num_logprobs >= 0 ? &out.logprobs[r] : nullptr;
    step_logprobs_[static_cast<std::size_t>(s.slot)] = logprobs;
    if (tracer_.is_traced(s.slot)) tracer_.token(s.slot, index, token, logprobs, now());
  }
}

void EngineCore::emit(const std::vector<RequestUpdate>& updates) {
  std::vector<std::vector<TokenLogprobs>> logprobs(updates.size());
  for (std::size_t u = 0; u < updates.size(); ++u) {
    num_generated_tokens_ += static_cast<std::int64_t>(updates[u].new_token_ids.size());
    const auto slot = static_cast<std::size_t>(updates[u].slot);
    const SampledLogprobs* lp = slot < step_logprobs_.size() ? step_logprobs_[slot] : nullptr;
    if (lp != nullptr) logprobs[u].push_back({lp->token_id, lp->logprob, lp->top});
  }
  ProcessedOutputs result = outputs_.process(updates, now(), logprobs);
  follow_reasoning(result.reasoning);
  // A stop string ended these in text; the scheduler must still free their blocks, while their
  // slots still name them (delivering the final output releases the slot).
  for (const std::int32_t slot : result.requests_to_abort) {
    scheduler_.abort_request(live(slot).request_id);
  }
  for (std::size_t i = 0; i < result.outputs.size(); ++i) {
    deliver(result.output_slots[i], std::move(result.outputs[i]));
  }
  end_failed_constraints();
}

// Trace events for spans that opened or closed, and budgets: once a request has spent its
// reasoning tokens inside an open span, its next tokens are the end tag.
void EngineCore::follow_reasoning(const std::vector<ReasoningProgress>& progress) {
  for (const ReasoningProgress& p : progress) {
    std::optional<ReasoningBudget>& budget = live(p.slot).budget;
    if (p.opened) tracer_.reasoning_start(p.slot, p.num_output_tokens, now());
    if (p.closed) {
      const bool forced = budget && budget->spent;
      tracer_.reasoning_end(p.slot, p.num_output_tokens, p.num_reasoning_tokens, forced, now());
    }
    if (!budget) continue;
    ReasoningBudget& b = *budget;
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
  // A step launched after it (overlapped steps) ran on the failed step's tokens: it fails too.
  std::optional<InFlightStep> later = in_flight_;
  drop_in_flight();
  // Nothing runs now, and a step scheduled but not launched never will: every step is over.
  scheduler_.step_done(scheduler_.last_step_id());
  step_done(scheduler_.last_step_id());
  for (const ScheduledRequest& s : scheduled.requests) abort(s.slot, error);
  if (later) {
    for (const ScheduledRequest& s : later->scheduled.requests) abort(s.slot, error);
  }
  std::vector<std::int32_t> holding;
  for (std::size_t i = 0; i < scheduler_.running().size(); ++i) {
    holding.push_back(scheduler_.running()[i]->slot());
  }
  for (const std::int32_t slot : holding) abort(slot, error);
  PAGODA_CHECK(scheduler_.reset_prefix_cache()) << "blocks still in use after a failed step";
}

void EngineCore::deliver(std::int32_t slot, RequestOutput output, Status error) {
  LiveRequest& l = live(slot);
  PAGODA_CHECK(l.request_id == output.request_id)
      << "output for " << output.request_id << " at the slot of '" << l.request_id << "'";
  if (!l.prompt_logprobs.empty()) output.prompt_logprobs = std::exchange(l.prompt_logprobs, {});
  if (!output.finished) {
    l.channel->push({l.index, std::move(output), std::move(error)});
    return;
  }
  tracer_.finished(slot, output, now());
  finals_to_send_.push_back({l.channel, {l.index, std::move(output), std::move(error)}});
  release_slot(slot);
}

// The one place a request's per-slot state goes, in every component, so the slot's next
// request starts clean.
void EngineCore::release_slot(std::int32_t slot) {
  LiveRequest& l = live(slot);
  if (l.request_id.empty()) return;
  wait_for_constraint_masks();  // the filler may hold its constraint (a step that failed early)
  if (l.drafts) speculator_->remove(slot);
  runner_.clear_prompt_scoring(slot);
  tracer_.release(slot);
  outputs_.release(slot);
  slot_of_.erase(l.request_id);
  l = LiveRequest{};
  // A launched step still samples for this slot: it stays taken until that step is collected.
  if (slot_last_step_[static_cast<std::size_t>(slot)] > done_step_id_) {
    deferred_slots_.push_back(slot);
  } else {
    free_slot(slot);
  }
}

void EngineCore::free_slot(std::int32_t slot) {
  executor_->close_sampling_slot(slot);
  slots_.release(slot);
}

void EngineCore::publish_stats() {
  {
    const SchedulerStats s = scheduler_.stats();
    std::lock_guard lock(mutex_);
    copy_stats(s);
  }
  // After the stats that count their requests gone: a client that reads the metrics once it has
  // its answer sees its blocks and slot released (unless a launched step still names them).
  for (FinalToSend& f : finals_to_send_) f.channel->push(std::move(f.item));
  finals_to_send_.clear();
}

void EngineCore::copy_stats(const SchedulerStats& s) {
  stats_.num_running = s.num_running;
  stats_.num_waiting = s.num_waiting;
  stats_.kv_cache_usage = s.kv_cache_usage;
  stats_.num_kv_blocks = config_.cache.num_blocks;
  stats_.num_preemptions = s.num_preemptions;
  stats_.prefix_cache_queries = s.prefix_cache.queries;
  stats_.prefix_cache_hits = s.prefix_cache.hits;
  stats_.num_steps = num_steps_;
  stats_.num_scheduled_decode_tokens = s.num_scheduled_decode_tokens;
  stats_.num_scheduled_prefill_tokens = s.num_scheduled_prefill_tokens;
  stats_.num_failed_steps = num_failed_steps_;
  stats_.num_generated_tokens = num_generated_tokens_;
  stats_.num_slots_in_use = slots_.num_used();
  if (speculator_) stats_.spec_decode = speculator_->stats();
  stats_.device_time = executor_->device_time();
  stats_.host_gap = host_gap_.stats();
  if (mask_filler_) {
    stats_.constraint_masks = mask_filler_->num_filled();
    stats_.constraint_mask_seconds = mask_filler_->fill_seconds();
    stats_.constraint_mask_wait_seconds = mask_filler_->wait_seconds();
  }
  const trace::TraceSinkStats trace = tracer_.sink_stats();
  stats_.trace_events_written = trace.events_written;
  stats_.trace_events_dropped = trace.events_dropped;
  stats_.trace_bytes_written = trace.bytes_written;
  stats_.trace_seconds = tracer_.seconds_spent();
}

}  // namespace pagoda::engine
