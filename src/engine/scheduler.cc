#include "engine/scheduler.h"

#include <algorithm>
#include <span>
#include <utility>

#include "common/check.h"
#include "engine/stop_checker.h"
#include "pagoda/forward_batch.h"

namespace pagoda::engine {
namespace {

const SchedulerConfig& validated(const SchedulerConfig& config, const CacheConfig& cache) {
  const Status status = config.validate(cache);
  PAGODA_CHECK(status.ok()) << status.to_string();
  return config;
}

std::string n_tokens(std::int64_t n) {
  return std::to_string(n) + (n == 1 ? " token" : " tokens");
}

// Verified tokens are the accepted drafts, in order, then one token of the target's own.
void check_verified(const ScheduledRequest& scheduled, const std::vector<std::int32_t>& tokens) {
  const auto num_spec = static_cast<std::size_t>(scheduled.num_spec_tokens);
  PAGODA_CHECK(!tokens.empty() && tokens.size() <= num_spec + 1)
      << scheduled.request_id << ": " << tokens.size() << " tokens verified from " << num_spec
      << " drafts";
  const auto drafts = std::span(scheduled.token_ids).last(num_spec);
  PAGODA_CHECK(std::equal(tokens.begin(), tokens.end() - 1, drafts.begin()))
      << scheduled.request_id << ": verified tokens are not a prefix of its drafts";
}

}  // namespace

Scheduler::Scheduler(const SchedulerConfig& config, const CacheConfig& cache_config)
    : config_(validated(config, cache_config)),
      kv_(cache_config),
      waiting_(config.policy),
      running_(config.policy) {}

Status Scheduler::validate_request(const Request& request) const {
  const std::string& id = request.request_id();
  if (id.empty()) return invalid_argument("request id is empty");
  if (requests_.contains(id)) return invalid_argument("request id '" + id + "' is already in use");
  const std::int64_t prompt = request.num_prompt_tokens();
  if (prompt == 0) return invalid_argument("the prompt is empty; give at least one token");
  const auto prompt_ids = request.prompt_token_ids();
  if (std::any_of(prompt_ids.begin(), prompt_ids.end(), [](std::int32_t t) { return t < 0; })) {
    return invalid_argument("the prompt holds a negative token id");
  }
  const RequestOptions& options = request.options();
  if (options.max_tokens && *options.max_tokens < 1) {
    return invalid_argument("max_tokens is " + std::to_string(*options.max_tokens) +
                            "; it must be at least 1");
  }
  if (options.min_tokens < 0) {
    return invalid_argument("min_tokens is " + std::to_string(options.min_tokens) +
                            "; it must be at least 0");
  }
  const std::int64_t max_len = config_.max_model_len;
  if (prompt >= max_len) {
    return invalid_argument("the prompt has " + n_tokens(prompt) + " but max_model_len is " +
                            std::to_string(max_len) +
                            ", which leaves no room to generate; shorten the prompt");
  }
  const std::int64_t max_tokens = options.max_tokens.value_or(max_len - prompt);
  if (prompt + max_tokens > max_len) {
    return invalid_argument(
        "the prompt has " + n_tokens(prompt) + " and max_tokens is " + std::to_string(max_tokens) +
        ", " + std::to_string(prompt + max_tokens) + " in all, over max_model_len " +
        std::to_string(max_len) + "; shorten the prompt or set max_tokens to at most " +
        std::to_string(max_len - prompt));
  }
  if (options.min_tokens > max_tokens) {
    return invalid_argument("min_tokens (" + std::to_string(options.min_tokens) +
                            ") is greater than max_tokens (" + std::to_string(max_tokens) + ")");
  }
  return Status::ok_status();
}

Status Scheduler::add_request(std::unique_ptr<Request> request) {
  PAGODA_CHECK(request != nullptr) << "null request";
  PAGODA_RETURN_IF_ERROR(validate_request(*request));
  request->resolve_max_tokens(config_.max_model_len);
  request->set_arrival_seq(next_arrival_seq_++);
  kv_.update_block_hashes(*request);
  Request* raw = request.get();
  requests_.emplace(raw->request_id(), std::move(request));
  waiting_.add(raw);
  return Status::ok_status();
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.step_id = ++last_step_id_;
  out.finished_request_ids.swap(finished_in_batch_);
  out.finished_slots.swap(finished_slots_in_batch_);
  // A step-time budget below the cap still leaves every running decode its token and a prefill
  // chunk beside them, so it only ever slows the long prompts.
  const std::int64_t tokens = std::min(
      config_.max_num_batched_tokens,
      std::max(step_token_budget_, static_cast<std::int64_t>(running_.size()) + kMinPrefillChunk));
  // Under a step-time budget a prompt mid-prefill would take all of every step and keep the
  // waiting requests out until it is done: while any wait, one request gets at most half.
  std::int64_t threshold = config_.long_prefill_token_threshold;
  if (tokens < config_.max_num_batched_tokens && !waiting_.empty()) {
    const std::int64_t half = std::max<std::int64_t>(1, tokens / 2);
    threshold = threshold > 0 ? std::min(threshold, half) : half;
  }
  TokenBudget budget(tokens, threshold);
  scored_tokens_left_ = kMaxScoredTokensPerStep;
  // After a preemption the pool is known to be short; admitting now would only thrash.
  if (!schedule_running(budget, out)) schedule_waiting(budget, out);
  return out;
}

std::int64_t Scheduler::take_scored(const Request& request, std::int64_t num_new) {
  // Positions before the prompt's last token are the scored ones (each predicts a prompt token).
  const std::int64_t unscored = request.num_prompt_tokens() - 1 - request.num_computed_tokens();
  if (!request.options().scores_prompt || unscored <= 0 || num_new <= 0) return num_new;
  // Every unscored position it runs needs room; positions after them need none.
  if (std::min(num_new, unscored) > scored_tokens_left_) num_new = scored_tokens_left_;
  scored_tokens_left_ -= std::min(num_new, unscored);
  return num_new;
}

bool Scheduler::schedule_running(TokenBudget& budget, SchedulerOutput& out) {
  bool preempted = false;
  const bool step_budget_active = step_token_budget_ < config_.max_num_batched_tokens;
  for (std::size_t i = 0; i < running_.size() && !budget.exhausted(); ++i) {
    Request& request = *running_[i];
    const std::int64_t ahead = tokens_ahead(request);
    if (ahead < 0) continue;  // waiting for its sampled token
    std::int64_t num_new =
        budget.grant(request.num_tokens() + ahead - request.num_computed_tokens());
    if (step_budget_active) {
      // A prefill chunk leaves a token for each request after it, so a tight step budget
      // never skips a decode that stands later in the policy order.
      const auto later = static_cast<std::int64_t>(running_.size() - i - 1);
      num_new = std::min(num_new, std::max<std::int64_t>(1, budget.remaining() - later));
    }
    num_new = take_scored(request, num_new);
    if (num_new <= 0) continue;  // waiting for its sampled token
    std::optional<std::vector<std::int32_t>> blocks;
    // Drafts only behind the last known token, within the budget, and only if their slots are
    // free now: a guess never preempts anyone.
    std::int64_t num_spec = 0;
    if (ahead == 0 && num_new == 1 && request.num_tokens() - request.num_computed_tokens() == 1) {
      num_spec = std::min(
          static_cast<std::int64_t>(request.spec_token_ids().size()),
          budget.grant(1 + static_cast<std::int64_t>(request.spec_token_ids().size())) - 1);
      if (num_spec > 0) blocks = kv_.allocate_slots(request, num_new, {}, num_spec);
      if (!blocks) num_spec = 0;
    }
    while (!blocks && !(blocks = kv_.allocate_slots(request, num_new))) {
      // The victim is always at or after position i, never a request served earlier this step.
      const bool self = running_.back() == &request;
      preempt_last_running(out);
      preempted = true;
      if (self) break;
    }
    if (!blocks) break;  // `request` was the last one and is now preempted
    add_scheduled(request, num_new, std::move(*blocks), /*is_new=*/false, out, num_spec);
    budget.consume(num_new + num_spec);
  }
  return preempted;
}

void Scheduler::schedule_waiting(TokenBudget& budget, SchedulerOutput& out) {
  while (!waiting_.empty() && !budget.exhausted() &&
         static_cast<std::int64_t>(running_.size()) < config_.max_num_seqs) {
    Request& request = *waiting_.front();
    // Preempted while its sample was in flight: it resumes once that token is known.
    if (request.num_samples_in_flight() > 0) break;
    const ComputedBlocks computed = kv_.get_computed_blocks(request);
    const std::int64_t num_new =
        take_scored(request, budget.grant(request.num_tokens() - computed.num_tokens));
    if (num_new <= 0) break;  // head of line waits for the next step's scoring room
    std::optional<std::vector<std::int32_t>> blocks =
        kv_.allocate_slots(request, num_new, computed);
    if (!blocks) break;  // head of line waits for blocks to free; nobody overtakes it
    waiting_.pop_front();
    if (request.num_preemptions() == 0) request.set_num_cached_prompt_tokens(computed.num_tokens);
    request.set_status(RequestStatus::kRunning);
    running_.add(&request);
    add_scheduled(request, num_new, std::move(*blocks), /*is_new=*/true, out);
    budget.consume(num_new);
  }
}

void Scheduler::add_scheduled(Request& request, std::int64_t num_tokens,
                              std::vector<std::int32_t> blocks, bool is_new, SchedulerOutput& out,
                              std::int64_t num_spec_tokens) {
  ScheduledRequest& s = out.requests.emplace_back();
  s.request_id = request.request_id();
  s.slot = request.slot();
  s.is_new = is_new;
  s.resumed_from_preemption = is_new && request.num_preemptions() > 0;
  s.num_computed_tokens = request.num_computed_tokens();
  // From the last known token on (in flight ones included) the request is decoding.
  if (s.num_computed_tokens >= request.num_tokens() - 1) {
    num_scheduled_decode_tokens_ += num_tokens + num_spec_tokens;
  } else {
    num_scheduled_prefill_tokens_ += num_tokens + num_spec_tokens;
  }
  // Tokens past the known ones are in flight (overlapped steps): placeholders the executor fills.
  const std::int64_t num_known =
      std::clamp<std::int64_t>(request.num_tokens() - s.num_computed_tokens, 0, num_tokens);
  const auto tokens = request.token_ids().subspan(s.num_computed_tokens, num_known);
  s.token_ids.assign(tokens.begin(), tokens.end());
  s.token_ids.resize(num_tokens, ForwardBatch::kTokenInFlight);
  s.last_token_in_flight = num_known < num_tokens;
  const std::vector<std::int32_t>& drafts = request.spec_token_ids();
  s.token_ids.insert(s.token_ids.end(), drafts.begin(), drafts.begin() + num_spec_tokens);
  s.num_spec_tokens = num_spec_tokens;
  request.set_spec_token_ids({});
  // A new request's returned blocks are its whole table (it held none before the call). The
  // other groups' tables grew in step with group 0's: their last blocks.size() entries.
  s.group_block_ids.resize(kv_.num_groups() - 1);
  for (std::size_t g = 1; g < kv_.num_groups(); ++g) {
    const std::vector<std::int32_t>& table = request.block_ids(g);
    const std::size_t first = is_new ? 0 : table.size() - blocks.size();
    s.group_block_ids[g - 1].assign(table.begin() + static_cast<std::ptrdiff_t>(first),
                                    table.end());
  }
  s.block_ids = std::move(blocks);
  const std::int64_t computed_after = s.num_computed_tokens + num_tokens;
  s.needs_sample = computed_after == request.num_tokens() + request.num_samples_in_flight();
  s.output_index = request.num_output_tokens() + request.num_samples_in_flight();
  if (s.needs_sample) request.add_sample_in_flight();
  request.set_last_step_id(out.step_id);
  // Advanced now, not after the step: the step runs before anything else reads it, and the
  // next schedule() must not hand out these tokens again.
  request.set_num_computed_tokens(computed_after);
  out.total_num_scheduled_tokens += num_tokens + num_spec_tokens;
}

void Scheduler::preempt_last_running(SchedulerOutput& out) {
  Request& victim = *running_.back();
  running_.pop_back();
  kv_.free(victim);
  victim.set_spec_token_ids({});
  // Recompute: the K/V is gone; prompt + output so far is the new prompt.
  victim.set_num_computed_tokens(0);
  victim.set_status(RequestStatus::kPreempted);
  victim.count_preemption();
  ++num_preemptions_;
  waiting_.add_preempted(&victim);
  out.preempted_request_ids.push_back(victim.request_id());
  out.preempted_slots.push_back(victim.slot());
}

std::vector<RequestUpdate> Scheduler::update_from_output(const SchedulerOutput& output,
                                                         const SampledTokens& sampled) {
  PAGODA_CHECK_EQ(sampled.token_ids.size(), output.requests.size())
      << "sampled tokens must align with the scheduled requests";
  step_done(output.step_id);
  std::vector<RequestUpdate> updates;
  for (std::size_t i = 0; i < output.requests.size(); ++i) {
    const ScheduledRequest& scheduled = output.requests[i];
    if (!scheduled.needs_sample) continue;
    // Gone since it was scheduled: aborted, or finished by the step before (overlapped steps).
    // The slot tells a new request that reuses the id apart: a slot named by a step in flight
    // is not handed out again before that step is done.
    const auto it = requests_.find(scheduled.request_id);
    if (it == requests_.end() || it->second->slot() != scheduled.slot) continue;
    Request& request = *it->second;
    request.remove_sample_in_flight();
    if (sampled.token_ids[i].empty()) continue;
    // Preempted by the schedule that overlapped this step: the token is still its next one.
    PAGODA_CHECK(request.status() == RequestStatus::kRunning ||
                 request.status() == RequestStatus::kPreempted)
        << request.request_id() << " got tokens while " << request_status_name(request.status());
    const std::vector<std::int32_t>& tokens = sampled.token_ids[i];
    if (scheduled.num_spec_tokens > 0) check_verified(scheduled, tokens);
    RequestUpdate& update = updates.emplace_back();
    update.request_id = request.request_id();
    update.slot = request.slot();
    for (const std::int32_t token : tokens) {
      request.append_output_token(token);
      update.new_token_ids.push_back(token);
      const std::optional<RequestStatus> stop = check_stop(request, config_.max_model_len);
      if (!stop) continue;
      if (*stop == RequestStatus::kFinishedStopped) request.set_stop_token_id(token);
      update.status = *stop;
      break;  // tokens after a stop (accepted drafts past it) are dropped
    }
    // Roll back past the rejected drafts: only the last known token's and the accepted drafts'
    // K/V count, exactly as after a plain decode.
    if (scheduled.num_spec_tokens > 0 && !update.finished()) {
      request.set_num_computed_tokens(request.num_tokens() - 1);
    }
    kv_.update_block_hashes(request);
    update.stop_token_id = request.stop_token_id();
    update.num_prompt_tokens = request.num_prompt_tokens();
    update.num_cached_prompt_tokens = request.num_cached_prompt_tokens();
    update.num_output_tokens = request.num_output_tokens();
    if (update.finished()) finish(it, update.status);
  }
  return updates;
}

void Scheduler::step_done(std::int64_t step_id) {
  last_done_step_id_ = std::max(last_done_step_id_, step_id);
  std::erase_if(retiring_, [this](std::unique_ptr<Request>& request) {
    if (request->last_step_id() > last_done_step_id_) return false;
    kv_.free(*request);
    return true;
  });
}

bool Scheduler::set_spec_token_ids(std::string_view request_id,
                                   std::vector<std::int32_t> token_ids) {
  const auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  it->second->set_spec_token_ids(std::move(token_ids));
  return true;
}

bool Scheduler::abort_request(std::string_view request_id) {
  const auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  finish(it, RequestStatus::kFinishedAborted);
  return true;
}

void Scheduler::finish(RequestMap::iterator it, RequestStatus status) {
  Request& request = *it->second;
  if (request.status() == RequestStatus::kRunning) {
    running_.remove(&request);
    finished_in_batch_.push_back(request.request_id());
    finished_slots_in_batch_.push_back(request.slot());
  } else {
    waiting_.remove(&request);
  }
  request.set_status(status);
  // A step still in flight may write its blocks: they go back when that step is done.
  if (request.last_step_id() > last_done_step_id_) {
    retiring_.push_back(std::move(it->second));
  } else {
    kv_.free(request);
  }
  requests_.erase(it);
}

std::int64_t Scheduler::tokens_ahead(const Request& request) const {
  const std::int64_t in_flight = request.num_samples_in_flight();
  if (in_flight == 0) return 0;
  if (!request.schedules_ahead()) return -1;
  // Its end is known ahead: the token in flight is its last one.
  if (request.num_output_tokens() + in_flight >= request.max_tokens() ||
      request.num_tokens() + in_flight >= config_.max_model_len) {
    return -1;
  }
  return in_flight;
}

const Request* Scheduler::find_request(std::string_view request_id) const {
  const auto it = requests_.find(request_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running = static_cast<std::int64_t>(running_.size());
  s.num_waiting = static_cast<std::int64_t>(waiting_.size());
  s.kv_cache_usage = kv_.usage();
  s.num_preemptions = num_preemptions_;
  s.prefix_cache = kv_.prefix_cache_stats();
  s.num_scheduled_decode_tokens = num_scheduled_decode_tokens_;
  s.num_scheduled_prefill_tokens = num_scheduled_prefill_tokens_;
  return s;
}

}  // namespace pagoda::engine
