#include "sampling/logprobs_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/exp_avx2.h"

namespace pagoda::sampling::avx2 {
namespace {

double horizontal_sum_as_double(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  double sum = 0.0;
  for (const float lane : lanes) sum += lane;
  return sum;
}

}  // namespace

double sum_exp_shifted(const float* x, std::int64_t n, float shift) {
  using cpu::avx2::exp256;
  const __m256 s = _mm256_set1_ps(shift);
  double total = 0.0;
  std::int64_t i = 0;
  // Blocks of 128 values: each of the two accumulators' lanes adds 8 terms in [0, 1] in fp32
  // (relative error <= ~8 ulp), then the block's sum joins the double total.
  while (i + 16 <= n) {
    __m256 a0 = _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps();
    const std::int64_t end = std::min(n - 15, i + 128);
    for (; i < end; i += 16) {
      a0 = _mm256_add_ps(a0, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), s)));
      a1 = _mm256_add_ps(a1, exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), s)));
    }
    total += horizontal_sum_as_double(_mm256_add_ps(a0, a1));
  }
  for (; i < n; ++i) total += std::exp(double{x[i]} - double{shift});
  return total;
}

std::int64_t count_greater(const float* x, std::int64_t n, float value) {
  const __m256 v = _mm256_set1_ps(value);
  std::int64_t count = 0;
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), v, _CMP_GT_OQ));
    count += __builtin_popcount(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i) count += x[i] > value ? 1 : 0;
  return count;
}

void top_k_heap(const float* x, std::int64_t n, std::int64_t k, std::vector<std::int32_t>& heap) {
  heap.clear();
  if (k <= 0) return;
  // Min-heap on "better": the front is the worst id kept. Ids arrive in increasing order, so a
  // later id with a value equal to the front's never displaces it: a strict > test suffices.
  const auto better = [x](std::int32_t a, std::int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  };
  const auto offer = [&](std::int32_t id) {
    if (static_cast<std::int64_t>(heap.size()) < k) {
      heap.push_back(id);
      std::push_heap(heap.begin(), heap.end(), better);
    } else if (x[id] > x[heap.front()]) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = id;
      std::push_heap(heap.begin(), heap.end(), better);
    }
  };
  std::int64_t i = 0;
  for (; i < n && static_cast<std::int64_t>(heap.size()) < k; ++i)
    offer(static_cast<std::int32_t>(i));
  for (; i + 8 <= n; i += 8) {
    const __m256 threshold = _mm256_set1_ps(x[heap.front()]);
    auto mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), threshold, _CMP_GT_OQ)));
    while (mask != 0) {
      offer(static_cast<std::int32_t>(i + __builtin_ctz(mask)));
      mask &= mask - 1;
    }
  }
  for (; i < n; ++i) offer(static_cast<std::int32_t>(i));
}

}  // namespace pagoda::sampling::avx2
