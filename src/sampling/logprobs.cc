#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise_avx2.h"
#include "common/check.h"
#include "sampling/logprobs_avx2.h"

namespace pagoda::sampling {
namespace {

void check_token(std::span<const float> logits, std::int32_t token_id) {
  PAGODA_CHECK(token_id >= 0 && static_cast<std::size_t>(token_id) < logits.size())
      << "token " << token_id;
}

std::size_t clamp_top(std::int64_t num_top, std::size_t vocab) {
  return static_cast<std::size_t>(
      std::min<std::int64_t>(std::max<std::int64_t>(num_top, 0), static_cast<std::int64_t>(vocab)));
}

// Orders the k ids of `heap` best first and writes them with their logprobs.
void write_top(std::span<const float> logits, std::vector<std::int32_t>& heap, double log_z,
               SampledLogprobs& out) {
  std::sort(heap.begin(), heap.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  out.top.clear();
  for (const std::int32_t id : heap) {
    out.top.emplace_back(id, static_cast<float>(double{logits[id]} - log_z));
  }
}

}  // namespace

void compute_logprobs(std::span<const float> logits, std::int32_t token_id, std::int64_t num_top,
                      SampledLogprobs& out) {
  if (!cpu::cpu_has_avx2()) return compute_logprobs_reference(logits, token_id, num_top, out);
  check_token(logits, token_id);
  const float* x = logits.data();
  const auto n = static_cast<std::int64_t>(logits.size());
  const float max_logit = cpu::avx2::max_value(x, n);
  const double log_z = double{max_logit} + std::log(avx2::sum_exp_shifted(x, n, max_logit));
  const float chosen = logits[static_cast<std::size_t>(token_id)];
  out.token_id = token_id;
  out.logprob = static_cast<float>(double{chosen} - log_z);
  out.rank = 1 + avx2::count_greater(x, n, chosen);
  thread_local std::vector<std::int32_t> heap;
  avx2::top_k_heap(x, n, static_cast<std::int64_t>(clamp_top(num_top, logits.size())), heap);
  write_top(logits, heap, log_z, out);
}

void compute_logprobs_reference(std::span<const float> logits, std::int32_t token_id,
                                std::int64_t num_top, SampledLogprobs& out) {
  check_token(logits, token_id);
  // log_softmax in double: the normalizer over ~50k terms loses digits in float.
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(double{l} - max_logit);
  const double log_z = max_logit + std::log(sum);
  const float chosen = logits[static_cast<std::size_t>(token_id)];
  out.token_id = token_id;
  out.logprob = static_cast<float>(double{chosen} - log_z);
  out.rank = 1 + std::count_if(logits.begin(), logits.end(), [&](float l) { return l > chosen; });

  const std::size_t k = clamp_top(num_top, logits.size());
  // A bounded min-heap of the best k keeps this O(vocab log k) rather than a full sort.
  const auto better = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<std::int32_t> heap;
  heap.reserve(k + 1);
  for (std::int32_t id = 0; k > 0 && id < static_cast<std::int32_t>(logits.size()); ++id) {
    if (heap.size() < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (better(id, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  }
  write_top(logits, heap, log_z, out);
}

}  // namespace pagoda::sampling
