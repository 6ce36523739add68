// One request's position in its constraint: which tokens may come next (as an allowed-token
// bitmask in pagoda/step_sampling.h's layout: bit v of word v / 32), accepting each sampled
// token, and whether the output is complete. Rolls back for speculative decoding. Owned by the
// engine thread, one per constrained request.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "structured/compiled_constraint.h"

namespace pagoda::structured {

class ConstraintMatcher {
 public:
  /// Once the constraint is complete only `stop_token_ids` are allowed (the request's EOS and
  /// stop ids); accepting one terminates the matcher.
  ConstraintMatcher(std::shared_ptr<const CompiledConstraint> constraint,
                    std::vector<std::int32_t> stop_token_ids);
  ~ConstraintMatcher();
  ConstraintMatcher(ConstraintMatcher&&) noexcept;
  ConstraintMatcher& operator=(ConstraintMatcher&&) noexcept;

  /// Words of one mask for this vocabulary.
  std::int64_t mask_words() const { return (constraint_->vocab_size() + 31) / 32; }
  /// Writes the tokens allowed next into `mask` (mask_words() words); false when none is (the
  /// constraint cannot go on).
  bool fill_next_token_mask(std::span<std::uint32_t> mask);
  /// Advances by `token_id`; false (and no change) when the constraint does not allow it.
  bool accept_token(std::int32_t token_id);
  /// Advances by text that is already in the output (after a reasoning span's end tag, in the
  /// same token); false (and no change) when the constraint does not allow it.
  bool accept_text(std::string_view text);
  /// Undoes the last `num_tokens` accepted tokens.
  void rollback(std::int32_t num_tokens);
  /// A stop token was accepted after a complete output.
  bool is_terminated() const;
  /// The output so far is complete (only stop tokens may follow, or more where the grammar
  /// allows).
  bool is_completed() const;
  const CompiledConstraint& constraint() const { return *constraint_; }

 private:
  struct Impl;
  std::shared_ptr<const CompiledConstraint> constraint_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagoda::structured
