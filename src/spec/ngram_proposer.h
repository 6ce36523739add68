// Prompt lookup decoding: no extra model. If the request's last n tokens occurred earlier in
// its prompt or output, the tokens that followed them are a cheap guess at what comes next.
// Strong where the answer copies its input (code edits, RAG, summaries).
//
//   tokens   ... a b c d e ... x y a b c | <- suffix "a b c" (n = 3)
//                  ^^^^^ ^^^                 earlier occurrence; proposal = "d e ..."
//
// Longest suffix first (n from prompt_lookup_max down to prompt_lookup_min); among the
// occurrences of that suffix the most recent wins, since nearby text is the likelier copy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "spec/proposer.h"

namespace pagoda::spec {

/// Stateless n-gram proposer; cheap enough to run on every request every step.
class NgramProposer final : public Proposer {
 public:
  /// Suffixes of `min_n`..`max_n` tokens (1 <= min_n <= max_n).
  NgramProposer(std::int64_t min_n, std::int64_t max_n);

  /// Up to `max_tokens` tokens that followed the longest matching suffix of `tokens` at its most
  /// recent earlier occurrence; empty when no suffix of min_n or more tokens recurs.
  std::vector<std::int32_t> lookup(std::span<const std::int32_t> tokens,
                                   std::int64_t max_tokens) const;
  /// lookup() for each request; no probabilities (the proposal is deterministic).
  void propose(std::span<const ProposalRequest> requests,
               std::vector<Proposal>& proposals) override;

 private:
  std::int64_t min_n_;
  std::int64_t max_n_;
};

}  // namespace pagoda::spec
