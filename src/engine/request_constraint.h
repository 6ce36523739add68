// A structured-output request's constraint as the engine follows it: the matcher, and a gate
// that holds it back while the output is inside a thinking span (--reasoning-parser), so the
// model reasons freely and the constraint starts right after the end tag:
//
//   prompt ends inside "<think>"?  no  --> active from the first token
//                                  yes --> waiting: tokens' bytes scanned for the end tag
//                                          --end tag--> active (text after the tag in the same
//                                                       token is fed to the matcher)
//
// Active: each step the engine fills the row's allowed-token mask (fill_mask), and accept()s the
// sampled token. Completed means a stop token came after a complete output (the request ends
// with "stop" on that token); a token the constraint refuses cannot be sampled through the mask,
// and an empty mask means the constraint cannot go on (the engine ends the request).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "structured/compiled_constraint.h"
#include "structured/constraint_matcher.h"

namespace pagoda::engine {

class RequestConstraint {
 public:
  /// `stop_token_ids`: the request's (EOS and stop_token_ids), at least one. `end_tag`: set when
  /// the output starts inside a thinking span that this tag closes.
  RequestConstraint(std::shared_ptr<const structured::CompiledConstraint> constraint,
                    std::vector<std::int32_t> stop_token_ids, std::optional<std::string> end_tag);

  /// Whether the next token is constrained (not waiting for a span to end, not complete).
  bool active() const { return !end_tag_ && !matcher_.is_terminated(); }
  /// The mask for the next token; false when no token is allowed.
  bool fill_mask(std::span<std::uint32_t> mask) { return matcher_.fill_next_token_mask(mask); }
  std::int64_t mask_words() const { return matcher_.mask_words(); }

  enum class Outcome : std::uint8_t {
    kContinue,  ///< Accepted (or free text before the constraint starts).
    kComplete,  ///< A stop token after a complete output.
    kRefused,   ///< The constraint does not allow this token.
  };
  /// Follows the next output token.
  Outcome accept(std::int32_t token_id);

 private:
  structured::ConstraintMatcher matcher_;
  std::optional<std::string> end_tag_;  // set while waiting for the span to close
  std::string tail_;                    // the waiting output's last bytes (a cut tag)
};

}  // namespace pagoda::engine
