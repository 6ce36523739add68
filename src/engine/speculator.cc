#include "engine/speculator.h"

#include <algorithm>
#include <utility>

#include "common/check.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"

namespace pagoda::engine {

StatusOr<std::unique_ptr<Speculator>> Speculator::create(
    const spec::SpeculativeConfig& config, std::shared_ptr<ModelExecutor> draft_executor,
    std::int64_t target_vocab_size, std::int64_t block_size, std::int64_t draft_num_blocks,
    bool single_kv_table) {
  PAGODA_RETURN_IF_ERROR(config.validate());
  std::unique_ptr<spec::Proposer> proposer;
  if (config.method == spec::SpeculativeMethod::kNgram) {
    proposer =
        std::make_unique<spec::NgramProposer>(config.prompt_lookup_min, config.prompt_lookup_max);
  } else {
    if (draft_executor == nullptr) {
      return invalid_argument(
          "--speculative-config: method \"draft_model\" needs the draft "
          "model loaded; this engine was built without one");
    }
    PAGODA_ASSIGN_OR_RETURN(
        proposer, spec::DraftModelProposer::create(std::move(draft_executor), target_vocab_size,
                                                   block_size, draft_num_blocks, single_kv_table));
  }
  return std::unique_ptr<Speculator>(new Speculator(config, std::move(proposer)));
}

Speculator::Speculator(const spec::SpeculativeConfig& config,
                       std::unique_ptr<spec::Proposer> proposer)
    : config_(config), proposer_(std::move(proposer)), policy_(config) {
  stats_.num_accepted_tokens_per_pos.assign(static_cast<std::size_t>(config.num_speculative_tokens),
                                            0);
}

Speculator::RequestState* Speculator::find(std::int32_t slot) {
  if (slot < 0 || static_cast<std::size_t>(slot) >= requests_.size()) return nullptr;
  std::optional<RequestState>& state = requests_[static_cast<std::size_t>(slot)];
  return state ? &*state : nullptr;
}

void Speculator::add(std::int32_t slot, const SamplingParams& params,
                     std::span<const std::int32_t> prompt_token_ids,
                     std::vector<std::int32_t> stop_token_ids) {
  PAGODA_CHECK(slot >= 0 && !contains(slot)) << "slot " << slot << " is not free";
  if (static_cast<std::size_t>(slot) >= requests_.size()) requests_.resize(slot + 1);
  requests_[static_cast<std::size_t>(slot)].emplace(
      RequestState{params,
                   sampling::Sampler(params, prompt_token_ids, std::move(stop_token_ids)),
                   sampling::RejectionSampler(params),
                   {}});
  ++num_requests_;
}

void Speculator::accept(std::int32_t slot, std::int32_t token) {
  if (RequestState* state = find(slot)) state->sampler.accept(token);
}

void Speculator::remove(std::int32_t slot) {
  if (!contains(slot)) return;
  requests_[static_cast<std::size_t>(slot)].reset();
  --num_requests_;
  proposer_->remove(slot);
  policy_.remove(slot);
}

bool Speculator::contains(std::int32_t slot) const {
  return slot >= 0 && static_cast<std::size_t>(slot) < requests_.size() &&
         requests_[static_cast<std::size_t>(slot)].has_value();
}

void Speculator::propose(Scheduler& scheduler) {
  if (num_requests_ == 0) return;
  const RequestQueue& running = scheduler.running();
  // Drafts left from a step that did not schedule them are dropped: every step drafts afresh.
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (running[i]->spec_token_ids().empty()) continue;
    scheduler.set_spec_token_ids(running[i]->request_id(), {});
  }
  std::int64_t num_decoding = 0;
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (running[i]->num_tokens() - running[i]->num_computed_tokens() == 1) ++num_decoding;
  }
  if (!policy_.allows_batch(num_decoding)) return;
  const std::int64_t max_model_len = scheduler.config().max_model_len;
  batch_.clear();
  batch_requests_.clear();
  for (std::size_t i = 0; i < running.size(); ++i) {
    const Request& request = *running[i];
    if (request.num_tokens() - request.num_computed_tokens() != 1) continue;
    RequestState* state = find(request.slot());
    if (state == nullptr) continue;
    // Drafts past max_tokens would be dropped anyway; past max_model_len they have no slot.
    const std::int64_t room = std::min(request.max_tokens() - request.num_output_tokens() - 1,
                                       max_model_len - request.num_tokens());
    if (room <= 0) continue;
    const std::int64_t k = std::min(room, policy_.num_tokens_to_draft(request.slot()));
    if (k <= 0) continue;
    batch_.push_back({request.slot(), request.token_ids(), k, &state->sampling});
    batch_requests_.push_back(&request);
  }
  if (batch_.empty()) return;
  proposer_->propose(batch_, proposals_);
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    spec::Proposal& proposal = proposals_[i];
    if (proposal.token_ids.empty()) continue;
    find(batch_[i].slot)->draft_probs = std::move(proposal.probs);
    scheduler.set_spec_token_ids(batch_requests_[i]->request_id(), std::move(proposal.token_ids));
  }
}

std::vector<std::int32_t> Speculator::verify(const ScheduledRequest& scheduled,
                                             std::span<const float> logits) {
  RequestState* found = find(scheduled.slot);
  PAGODA_CHECK(found != nullptr) << scheduled.request_id << " drafted without a speculator";
  RequestState& state = *found;
  const auto num_spec = static_cast<std::size_t>(scheduled.num_spec_tokens);
  const std::span<const std::int32_t> drafts = std::span(scheduled.token_ids).last(num_spec);
  const std::size_t vocab = logits.size() / (num_spec + 1);
  // The scheduler may have kept only the first drafts (budget); q rows follow them.
  std::span<const float> q = state.draft_probs;
  if (!q.empty()) q = q.first(num_spec * vocab);
  std::vector<std::int32_t> tokens = state.verifier.verify(state.sampler, logits, drafts, q);
  state.draft_probs.clear();

  const auto num_accepted = static_cast<std::int64_t>(tokens.size()) - 1;
  ++stats_.num_drafts;
  stats_.num_draft_tokens += scheduled.num_spec_tokens;
  stats_.num_accepted_tokens += num_accepted;
  for (std::int64_t p = 0; p < num_accepted; ++p) {
    ++stats_.num_accepted_tokens_per_pos[static_cast<std::size_t>(p)];
  }
  policy_.record(scheduled.slot, scheduled.num_spec_tokens, num_accepted);
  return tokens;
}

}  // namespace pagoda::engine
