#include "spec/ngram_proposer.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::spec {

NgramProposer::NgramProposer(std::int64_t min_n, std::int64_t max_n)
    : min_n_(min_n), max_n_(max_n) {
  PAGODA_CHECK(min_n_ >= 1 && max_n_ >= min_n_) << "n-gram sizes " << min_n_ << ".." << max_n_;
}

void NgramProposer::propose(std::span<const ProposalRequest> requests,
                            std::vector<Proposal>& proposals) {
  proposals.resize(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    proposals[i].token_ids = lookup(requests[i].token_ids, requests[i].max_tokens);
    proposals[i].probs.clear();
  }
}

std::vector<std::int32_t> NgramProposer::lookup(std::span<const std::int32_t> tokens,
                                                std::int64_t max_tokens) const {
  const auto len = static_cast<std::int64_t>(tokens.size());
  if (max_tokens <= 0) return {};
  for (std::int64_t n = std::min(max_n_, len - 1); n >= min_n_; --n) {
    const std::span<const std::int32_t> suffix = tokens.last(static_cast<std::size_t>(n));
    // Occurrences start at s in [0, len - n - 1]; the latest that still has a next token wins.
    for (std::int64_t start = len - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const std::int64_t from = start + n;
      const std::int64_t count = std::min(max_tokens, len - from);
      const auto first = tokens.begin() + from;
      return {first, first + count};
    }
  }
  return {};
}

}  // namespace pagoda::spec
