// The scalar oracle of HostSampler's token choice, written straight from the rules of
// pagoda/step_sampling.h: full sorts, probabilities and sums in double, std::log in the draw.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "sampling/host_sampler.h"
#include "sampling/random_draw.h"

namespace pagoda::sampling {
namespace {

bool is_greedy(const SamplingRow& row) {
  return row.temperature <= 0.0f || row.top_k == 1;
}

// The first index of the largest value.
std::size_t first_argmax(std::span<const float> x) {
  return static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// s = l' * (1 / temperature), as every backend computes it.
std::vector<float> scaled(std::span<const float> processed, const SamplingRow& row) {
  const float scale = 1.0f / row.temperature;
  std::vector<float> s(processed.size());
  for (std::size_t v = 0; v < s.size(); ++v) s[v] = processed[v] * scale;
  return s;
}

}  // namespace

std::vector<bool> kept_tokens_reference(std::span<const float> processed, const SamplingRow& row) {
  const std::size_t n = processed.size();
  std::vector<bool> kept(n, true);
  if (is_greedy(row)) return kept;
  const std::vector<float> s = scaled(processed, row);
  const float max_s = s[first_argmax(s)];
  if (!std::isfinite(max_s)) {
    // No distribution to cut: the pick is the argmax.
    std::fill(kept.begin(), kept.end(), false);
    kept[first_argmax(processed)] = true;
    return kept;
  }
  std::vector<double> p(n);
  for (std::size_t v = 0; v < n; ++v) p[v] = std::exp(double{s[v]} - double{max_s});

  if (row.top_k > 0 && static_cast<std::size_t>(row.top_k) < n) {
    std::vector<float> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const float s_k = sorted[static_cast<std::size_t>(row.top_k) - 1];
    for (std::size_t v = 0; v < n; ++v) kept[v] = s[v] >= s_k;
  }
  if (row.top_p < 1.0f) {
    std::vector<double> sorted;
    for (std::size_t v = 0; v < n; ++v) {
      if (kept[v]) sorted.push_back(p[v]);
    }
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    double total = 0.0;
    for (const double pi : sorted) total += pi;
    const double target = double{row.top_p} * total;
    // The largest t whose p >= t (ties included) reach the target.
    double t = sorted.back();
    double mass = 0.0;
    for (std::size_t i = 0; i < sorted.size();) {
      std::size_t end = i;
      for (; end < sorted.size() && sorted[end] == sorted[i]; ++end) mass += sorted[end];
      if (mass >= target) {
        t = sorted[i];
        break;
      }
      i = end;
    }
    for (std::size_t v = 0; v < n; ++v) kept[v] = kept[v] && p[v] >= t;
  }
  if (row.min_p > 0.0f) {
    for (std::size_t v = 0; v < n; ++v) kept[v] = kept[v] && p[v] >= double{row.min_p};
  }
  return kept;
}

std::int32_t pick_token_reference(std::span<const float> processed, const SamplingRow& row) {
  if (row.forced_token >= 0) return row.forced_token;
  const auto argmax = static_cast<std::int32_t>(first_argmax(processed));
  if (is_greedy(row)) return argmax;
  const std::vector<float> s = scaled(processed, row);
  const std::vector<bool> kept = kept_tokens_reference(processed, row);
  const std::uint64_t key = draw_key(row.seed, row.position);
  float best = -std::numeric_limits<float>::infinity();
  std::int32_t token = argmax;  // when nothing is kept (min_p > 1) or every score is -inf
  for (std::size_t v = 0; v < s.size(); ++v) {
    if (!kept[v]) continue;
    const float score = s[v] + token_gumbel(key, static_cast<std::uint32_t>(v));
    if (score > best) {
      best = score;
      token = static_cast<std::int32_t>(v);
    }
  }
  return token;
}

}  // namespace pagoda::sampling
