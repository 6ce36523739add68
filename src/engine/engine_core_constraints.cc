// EngineCore's part in structured outputs: where each constrained row's token mask goes, the
// matchers following the sampled tokens, and the requests whose constraint failed.
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_core.h"

namespace pagoda::engine {

// A constrained request samples its next token through a mask of what its constraint allows
// after the tokens so far; unconstrained requests (and prompt-scoring rows) get none. The masks'
// places are laid out here; the filler writes them while the forward pass runs, and the
// executor waits for them before it samples (constraint_mask_filler.h).
void EngineCore::fill_constraint_masks(const SchedulerOutput& scheduled) {
  SamplingBatch& sampling = runner_.mutable_sampling();
  std::vector<std::pair<std::size_t, std::size_t>> placed;  // (scheduled index, first word)
  std::size_t words = 0;
  for (std::size_t i = 0; i < scheduled.requests.size(); ++i) {
    const ScheduledRequest& s = scheduled.requests[i];
    LiveRequest& l = live(s.slot);
    if (!l.constraint || !l.constraint->active() || l.constraint_failure) continue;
    const std::span<SamplingRow> rows = runner_.rows_for(i);
    if (rows.empty() || rows.back().prompt_row || rows.back().return_logits) continue;
    words = static_cast<std::size_t>(l.constraint->mask_words());
    rows.back().allowed_mask = static_cast<std::int32_t>(placed.size());
    placed.emplace_back(i, placed.size() * words);
  }
  if (placed.empty()) return;
  // Sized once, before the filler starts: it writes into this storage.
  sampling.allowed_masks.assign(placed.size() * words, 0u);
  std::vector<ConstraintMaskFiller::Job> jobs;
  jobs.reserve(placed.size());
  for (const auto& [i, first] : placed) {
    LiveRequest& l = live(scheduled.requests[i].slot);
    jobs.push_back({.constraint = l.constraint.get(),
                    .words = std::span(sampling.allowed_masks).subspan(first, words),
                    .failure = &l.constraint_failure});
  }
  if (!mask_filler_) mask_filler_ = std::make_unique<ConstraintMaskFiller>();
  mask_filler_->start(std::move(jobs));
  sampling.pending_masks = mask_filler_.get();
}

void EngineCore::wait_for_constraint_masks() {
  if (mask_filler_) mask_filler_->wait();
}

bool EngineCore::follow_constraint(std::int32_t slot, std::int32_t token) {
  LiveRequest& l = live(slot);
  if (!l.constraint) return true;
  if (!l.constraint_failure &&
      l.constraint->accept(token) == RequestConstraint::Outcome::kRefused) {
    l.constraint_failure = invalid_argument("the structured output left its constraint (token " +
                                            std::to_string(token) + " is not allowed there)");
  }
  if (!l.constraint_failure) return true;
  failed_constraint_slots_.push_back(slot);
  return false;
}

void EngineCore::end_failed_constraints() {
  for (const std::int32_t slot : std::exchange(failed_constraint_slots_, {})) {
    LiveRequest& l = live(slot);
    if (l.request_id.empty() || !l.constraint_failure) continue;
    abort(slot, *l.constraint_failure);
  }
}

}  // namespace pagoda::engine
