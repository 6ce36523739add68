#include "engine/request_constraint.h"

#include "structured/token_vocabulary.h"

namespace pagoda::engine {

RequestConstraint::RequestConstraint(
    std::shared_ptr<const structured::CompiledConstraint> constraint,
    std::vector<std::int32_t> stop_token_ids, std::optional<std::string> end_tag)
    : matcher_(std::move(constraint), std::move(stop_token_ids)), end_tag_(std::move(end_tag)) {
  if (end_tag_ && end_tag_->empty()) end_tag_.reset();
}

RequestConstraint::Outcome RequestConstraint::accept(std::int32_t token_id) {
  if (end_tag_) {
    tail_ += matcher_.constraint().vocabulary().token_bytes(token_id);
    const std::size_t at = tail_.find(*end_tag_);
    if (at == std::string::npos) {
      // Keep only what could still be the start of a tag cut across tokens.
      if (tail_.size() >= end_tag_->size()) tail_.erase(0, tail_.size() - end_tag_->size() + 1);
      return Outcome::kContinue;
    }
    // The span closed: what follows the tag in this token is already output. Leading
    // whitespace is where the model puts a line break; the rest must fit the constraint.
    std::string_view after = std::string_view(tail_).substr(at + end_tag_->size());
    while (!after.empty() && (after.front() == ' ' || after.front() == '\n' ||
                              after.front() == '\r' || after.front() == '\t')) {
      after.remove_prefix(1);
    }
    const bool fits = matcher_.accept_text(after);
    end_tag_.reset();
    tail_.clear();
    return fits ? Outcome::kContinue : Outcome::kRefused;
  }
  if (!matcher_.accept_token(token_id)) return Outcome::kRefused;
  return matcher_.is_terminated() ? Outcome::kComplete : Outcome::kContinue;
}

}  // namespace pagoda::engine
