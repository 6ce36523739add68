#include "sampling/candidates.h"

#include <algorithm>

#include "common/check.h"

namespace pagoda::sampling {

namespace {

// Descending logit; ties go to the lower id, so results never depend on sort stability.
bool before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

void Candidates::reset(std::span<const float> logits) {
  entries.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) {
    entries[i] = {logits[i], static_cast<std::int32_t>(i)};
  }
  sorted = false;
}

void Candidates::keep_top(std::size_t k) {
  if (k >= entries.size()) {
    sort();
    return;
  }
  if (!sorted) {
    std::partial_sort(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(k),
                      entries.end(), before);
  }
  entries.resize(k);
  sorted = true;
}

void Candidates::sort() {
  if (!sorted) std::sort(entries.begin(), entries.end(), before);
  sorted = true;
}

float Candidates::max_logit() const {
  PAGODA_CHECK(!entries.empty()) << "no candidates";
  if (sorted) return entries.front().logit;
  return std::max_element(entries.begin(), entries.end(),
                          [](const Candidate& a, const Candidate& b) { return a.logit < b.logit; })
      ->logit;
}

}  // namespace pagoda::sampling
