// The tokens still in the running while a sampler chain narrows the logits down.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::sampling {

/// One token and its (possibly scaled) logit.
struct Candidate {
  float logit;
  std::int32_t id;
};

/// Tokens a sampler may still pick. Stages remove entries or rescale logits; `sorted` records
/// that the entries are in descending logit order (ties by ascending id), so a later stage that
/// needs the order does not sort again.
struct Candidates {
  std::vector<Candidate> entries;
  bool sorted = false;

  /// Every token of `logits`, unsorted. Keeps capacity: no allocation after the first step.
  void reset(std::span<const float> logits /* [vocab] */);
  /// Puts the first `k` entries in descending order and drops the rest.
  void keep_top(std::size_t k);
  /// Sorts every entry in descending order, if not sorted yet.
  void sort();
  /// The largest logit.
  float max_logit() const;
};

}  // namespace pagoda::sampling
