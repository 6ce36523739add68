#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace pagoda::sampling {

void compute_logprobs(std::span<const float> logits, std::int32_t token_id, std::int64_t num_top,
                      SampledLogprobs& out) {
  PAGODA_CHECK(token_id >= 0 && static_cast<std::size_t>(token_id) < logits.size())
      << "token " << token_id;
  // log_softmax in double: the normalizer over ~50k terms loses digits in float.
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double{l} - max_logit);
  const double log_z = max_logit + std::log(sum);
  const float chosen = logits[static_cast<std::size_t>(token_id)];
  out.token_id = token_id;
  out.logprob = static_cast<float>(double{chosen} - log_z);
  out.rank = 1 + std::count_if(logits.begin(), logits.end(), [&](float l) { return l > chosen; });

  out.top.clear();
  const auto k = static_cast<std::size_t>(std::min<std::int64_t>(
      std::max<std::int64_t>(num_top, 0), static_cast<std::int64_t>(logits.size())));
  if (k == 0) return;
  // A bounded min-heap of the best k keeps this O(vocab log k) rather than a full sort.
  const auto better = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<std::int32_t> heap;
  heap.reserve(k + 1);
  for (std::int32_t id = 0; id < static_cast<std::int32_t>(logits.size()); ++id) {
    if (heap.size() < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  for (const std::int32_t id : heap) {
    out.top.emplace_back(id, static_cast<float>(double{logits[id]} - log_z));
  }
}

}  // namespace pagoda::sampling
