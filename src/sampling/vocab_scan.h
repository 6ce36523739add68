// The passes HostSampler's fast path makes over one [vocab] row of processed logits: argmax, the
// Gumbel race, the softmax normalizer, and the selections behind top-k, top-p and min-p. Each runs
// 8 lanes at a time where the CPU has AVX2 (vocab_scan_avx2.h) and as plain loops elsewhere; both
// give the same answers, except that the race's AVX2 log may differ from std::log in its last ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace pagoda::sampling {

/// The largest value token_gumbel() returns (u = 1 - 2^-24: -log(-log(u)) = log(2^24) = 16.6355),
/// rounded up past any ulp of the fast log.
inline constexpr float kGumbelMax = 16.75f;

// The race's two skips (gumbel_race, on either ISA). A token of scaled logit s beats the best
// score so far only if its noise g exceeds its deficit d = best - s:
//   - g <= kGumbelMax, so a token with s < race_cutoff(best) is skipped before its hash;
//   - g > d needs -log(u) < e^-d, and -log(u) >= 1 - u, so 1 - u < 2^-floor(d log2(e)): with
//     u = (m + 0.5) 2^-23 (random_draw.h) that is m >= race_min_mantissa(d), tested on the
//     hash's bits before the two logs. A token 3 below the best passes with odds 1/16.
// Both work from a best lowered by a margin for the rounding of s + g and of the vectorized log.

/// Scaled logits below this cannot beat a race's `best` score.
inline float race_cutoff(float best) {
  return best - kGumbelMax - std::abs(best) * 0x1p-20f;
}

/// `best` less the margin the mantissa test leaves for rounding.
inline float race_bound(float best) {
  return best - (0.05f + std::abs(best) * 0x1p-20f);
}

/// The smallest 23-bit uniform mantissa m with which a token `deficit` below race_bound(best) can
/// still win: 2^23 - 2^(23 - k), k = floor(deficit log2(e)) clamped to [0, 24]; 0 (any) for a
/// deficit that is negative or NaN.
inline std::uint32_t race_min_mantissa(float deficit) {
  const float k = deficit * 1.44269504f;
  if (!(k >= 1.0f)) return 0;
  if (k >= 24.0f) return 1u << 23;  // above every mantissa
  return (1u << 23) - ((1u << 23) >> static_cast<int>(k));
}

/// The largest of x; -inf for an empty row.
float max_value(std::span<const float> x);

/// The lowest index of the largest of x (n >= 1).
std::int64_t argmax_index(std::span<const float> x);

/// The index i that maximizes x[i] * scale + token_gumbel(key, id(i)), id(i) = ids[i] when ids is
/// given, else i; the lowest i on ties; 0 when every score is -inf.
std::int64_t gumbel_race(std::span<const float> x, float scale, const std::int32_t* ids /* [n] */,
                         std::uint64_t key);

/// sum of exp(x[i] * scale - shift) for x[i] * scale <= shift; exp in fp32 where vectorized,
/// the total in double.
double sum_exp_scaled(std::span<const float> x, float scale, float shift);

/// Writes (x[i] * scale, i) for every i with x[i] * scale >= floor, in ascending i, to the front
/// of `s` and `ids` (room for n + 8 each: whole vectors are stored), and returns their number.
std::size_t gather_at_least(std::span<const float> x, float scale, float floor,
                            float* s /* [n + 8] */, std::int32_t* ids /* [n + 8] */);

/// p[i] = exp(s[i] - shift) for s[i] <= shift; where vectorized, in fp32: the difference
/// rounded, then exp within 2 ulp.
void exp_shifted(std::span<const float> s, float shift, double* p /* [n] */);

/// The k-th largest of x (1 <= k <= n); -inf when fewer than k values exceed -inf. On return
/// `buffer` holds the k largest values unless the answer is -inf (its capacity is kept).
float kth_largest(std::span<const float> x, std::int64_t k, std::vector<float>& buffer);

/// The largest t among `p` (>= 0 each) such that the p >= t sum to at least `target`; the
/// smallest p when none does. Reorders `p`; O(n) expected (quickselect on the mass).
double mass_threshold(std::span<double> p, double target);

}  // namespace pagoda::sampling
