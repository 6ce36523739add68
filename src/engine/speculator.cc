#include "engine/speculator.h"

#include <algorithm>
#include <utility>

#include "common/check.h"
#include "spec/draft_model_proposer.h"
#include "spec/ngram_proposer.h"

namespace pagoda::engine {

StatusOr<std::unique_ptr<Speculator>> Speculator::create(
    const spec::SpeculativeConfig& config, std::shared_ptr<ModelExecutor> draft_executor,
    std::int64_t target_vocab_size, std::int64_t block_size, std::int64_t draft_num_blocks) {
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
                                                   block_size, draft_num_blocks));
  }
  return std::unique_ptr<Speculator>(new Speculator(config, std::move(proposer)));
}

Speculator::Speculator(const spec::SpeculativeConfig& config,
                       std::unique_ptr<spec::Proposer> proposer)
    : config_(config), proposer_(std::move(proposer)), policy_(config) {
  stats_.num_accepted_tokens_per_pos.assign(static_cast<std::size_t>(config.num_speculative_tokens),
                                            0);
}

void Speculator::add(const std::string& request_id, const SamplingParams& params,
                     std::span<const std::int32_t> prompt_token_ids,
                     std::vector<std::int32_t> stop_token_ids) {
  requests_.try_emplace(
      request_id,
      RequestState{params, sampling::Sampler(params, prompt_token_ids, std::move(stop_token_ids)),
                   sampling::RejectionSampler(params), {}});
}

void Speculator::accept(std::string_view request_id, std::int32_t token) {
  if (const auto it = requests_.find(request_id); it != requests_.end()) {
    it->second.sampler.accept(token);
  }
}

void Speculator::remove(std::string_view request_id) {
  const auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  requests_.erase(it);
  proposer_->remove(request_id);
  policy_.remove(request_id);
}

bool Speculator::contains(std::string_view request_id) const {
  return requests_.find(request_id) != requests_.end();
}

void Speculator::propose(Scheduler& scheduler) {
  if (requests_.empty()) return;
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
  for (std::size_t i = 0; i < running.size(); ++i) {
    const Request& request = *running[i];
    if (request.num_tokens() - request.num_computed_tokens() != 1) continue;
    const auto it = requests_.find(request.request_id());
    if (it == requests_.end()) continue;
    // Drafts past max_tokens would be dropped anyway; past max_model_len they have no slot.
    const std::int64_t room = std::min(request.max_tokens() - request.num_output_tokens() - 1,
                                       max_model_len - request.num_tokens());
    if (room <= 0) continue;
    const std::int64_t k = std::min(room, policy_.num_tokens_to_draft(request.request_id()));
    if (k <= 0) continue;
    batch_.push_back({request.request_id(), request.token_ids(), k, &it->second.sampling});
  }
  if (batch_.empty()) return;
  proposer_->propose(batch_, proposals_);
  for (std::size_t i = 0; i < batch_.size(); ++i) {
    spec::Proposal& proposal = proposals_[i];
    if (proposal.token_ids.empty()) continue;
    requests_.find(batch_[i].request_id)->second.draft_probs = std::move(proposal.probs);
    scheduler.set_spec_token_ids(batch_[i].request_id, std::move(proposal.token_ids));
  }
}

std::vector<std::int32_t> Speculator::verify(const ScheduledRequest& scheduled,
                                             std::span<const float> logits) {
  const auto it = requests_.find(scheduled.request_id);
  PAGODA_CHECK(it != requests_.end()) << scheduled.request_id << " drafted without a speculator";
  RequestState& state = it->second;
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
  policy_.record(scheduled.request_id, scheduled.num_spec_tokens, num_accepted);
  return tokens;
}

}  // namespace pagoda::engine
