#include "structured/constraint_matcher.h"

#include "common/check.h"
#include "structured/xgrammar_handles.h"

namespace pagoda::structured {

struct ConstraintMatcher::Impl {
  xgrammar::GrammarMatcher matcher;
};

ConstraintMatcher::ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint,
                                     std::vector<std::int32_t> stop_token_ids)
    : constraint_(std::move(constraint)) {
  PAGODA_CHECK(constraint_ != nullptr) << "no constraint";
  std::optional<std::vector<int>> stops;
  if (!stop_token_ids.empty()) stops.emplace(stop_token_ids.begin(), stop_token_ids.end());
  impl_ = std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(constraint_->impl().grammar, stops,
                                                               /*terminate_without_stop_token=*/
                                                               false)});
}

ConstraintMatcher::~ConstraintMatcher() = default;
ConstraintMatcher::ConstraintMatcher(ConstraintMatcher&&) noexcept = default;
ConstraintMatcher& ConstraintMatcher::operator=(ConstraintMatcher&&) noexcept = default;

bool ConstraintMatcher::fill_next_token_mask(std::span<std::uint32_t> mask) {
  PAGODA_CHECK(static_cast<std::int64_t>(mask.size()) == mask_words())
      << "mask of " << mask.size() << " words for " << mask_words();
  if (impl_->matcher.IsTerminated()) {
    std::fill(mask.begin(), mask.end(), 0u);
    return false;
  }
  // xgrammar's bitmask is the same layout: int32 words, bit v % 32 of word v / 32.
  std::int64_t shape[1] = {static_cast<std::int64_t>(mask.size())};
  DLTensor tensor{};
  tensor.data = mask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  tensor.strides = nullptr;
  tensor.byte_offset = 0;
  impl_->matcher.FillNextTokenBitmask(&tensor);
  for (const std::uint32_t word : mask) {
    if (word != 0) return true;
  }
  return false;
}

bool ConstraintMatcher::accept_token(std::int32_t token_id) {
  if (impl_->matcher.IsTerminated()) return false;
  return impl_->matcher.AcceptToken(token_id);
}

bool ConstraintMatcher::accept_text(std::string_view text) {
  if (text.empty()) return true;
  if (impl_->matcher.IsTerminated()) return false;
  return impl_->matcher.AcceptString(std::string(text));
}

void ConstraintMatcher::rollback(std::int32_t num_tokens) {
  if (num_tokens > 0) impl_->matcher.Rollback(num_tokens);
}

bool ConstraintMatcher::is_terminated() const {
  return impl_->matcher.IsTerminated();
}

bool ConstraintMatcher::is_completed() const {
  return impl_->matcher.IsCompleted();
}

}  // namespace pagoda::structured
