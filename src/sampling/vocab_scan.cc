#include "sampling/vocab_scan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/elementwise_avx2.h"
#include "common/check.h"
#include "sampling/random_draw.h"
#include "sampling/vocab_scan_avx2.h"

namespace pagoda::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::int64_t size_of(std::span<const float> x) {
  return static_cast<std::int64_t>(x.size());
}

}  // namespace

float max_value(std::span<const float> x) {
  if (cpu::cpu_has_avx2()) return cpu::avx2::max_value(x.data(), size_of(x));
  float best = -kInf;
  for (const float v : x) best = v > best ? v : best;
  return best;
}

std::int64_t argmax_index(std::span<const float> x) {
  PAGODA_CHECK(!x.empty()) << "argmax of an empty row";
  if (cpu::cpu_has_avx2()) return avx2::argmax_index(x.data(), size_of(x));
  std::size_t best = 0;
  for (std::size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best]) best = i;
  }
  return static_cast<std::int64_t>(best);
}

std::int64_t gumbel_race(std::span<const float> x, float scale, const std::int32_t* ids,
                         std::uint64_t key) {
  if (cpu::cpu_has_avx2()) return avx2::gumbel_race(x.data(), size_of(x), scale, ids, key);
  float best = -kInf;
  float cutoff = -kInf;
  float bound = -kInf;
  std::int64_t best_i = 0;
  for (std::int64_t i = 0; i < size_of(x); ++i) {
    const float s = x[static_cast<std::size_t>(i)] * scale;
    if (!(s >= cutoff)) continue;
    const std::uint32_t bits =
        token_bits(key, static_cast<std::uint32_t>(ids != nullptr ? ids[i] : i));
    if ((bits >> 9) < race_min_mantissa(bound - s)) continue;
    const float score = s - std::log(-std::log(bits_to_uniform(bits)));  // + token_gumbel
    if (score > best) {
      best = score;
      best_i = i;
      cutoff = race_cutoff(best);
      bound = race_bound(best);
    }
  }
  return best_i;
}

double sum_exp_scaled(std::span<const float> x, float scale, float shift) {
  if (cpu::cpu_has_avx2()) return avx2::sum_exp_scaled(x.data(), size_of(x), scale, shift);
  double total = 0.0;
  for (const float v : x) total += std::exp(double{v * scale} - double{shift});
  return total;
}

std::size_t gather_at_least(std::span<const float> x, float scale, float floor, float* s,
                            std::int32_t* ids) {
  if (cpu::cpu_has_avx2()) return avx2::gather_at_least(x.data(), size_of(x), scale, floor, s, ids);
  std::size_t count = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i] * scale;
    if (v >= floor) {
      s[count] = v;
      ids[count] = static_cast<std::int32_t>(i);
      ++count;
    }
  }
  return count;
}

void exp_shifted(std::span<const float> s, float shift, double* p) {
  if (cpu::cpu_has_avx2()) return avx2::exp_shifted(s.data(), size_of(s), shift, p);
  for (std::size_t i = 0; i < s.size(); ++i) p[i] = std::exp(double{s[i]} - double{shift});
}

float kth_largest(std::span<const float> x, std::int64_t k, std::vector<float>& buffer) {
  const std::int64_t n = size_of(x);
  PAGODA_CHECK(k >= 1 && k <= n) << "k " << k << " of " << n;
  // `buffer` holds every value above `threshold`, the k-th largest of what it held at its last
  // trim. A value equal to the threshold cannot change the k-th largest, so only greater ones
  // join; with random order few do once the threshold is up, and the scan is one compare per
  // token.
  const auto k_size = static_cast<std::size_t>(k);
  const std::size_t trim_at = k_size + std::max<std::size_t>(k_size, 64);
  const auto trim = [&] {
    std::nth_element(buffer.begin(), buffer.begin() + k - 1, buffer.end(), std::greater<>());
    buffer.resize(k_size);
  };
  constexpr std::int64_t kChunk = 256;
  buffer.clear();
  float threshold = -kInf;
  for (std::int64_t begin = 0; begin < n; begin += kChunk) {
    const std::int64_t end = std::min(n, begin + kChunk);
    if (cpu::cpu_has_avx2()) {
      avx2::append_greater(x.data(), begin, end, threshold, buffer);
    } else {
      for (std::int64_t i = begin; i < end; ++i) {
        if (x[static_cast<std::size_t>(i)] > threshold)
          buffer.push_back(x[static_cast<std::size_t>(i)]);
      }
    }
    if (buffer.size() >= trim_at) {
      trim();
      threshold = buffer.back();
    }
  }
  if (buffer.size() < k_size) return -kInf;
  trim();
  return buffer.back();
}

namespace {

// mass_threshold over `p`, given that the values larger than all of `p` hold `above`.
double mass_threshold_after(std::span<double> p, double above, double target) {
  // The answer t lies in [lo, hi); `above` is the mass of the values known to be larger than
  // every value there. Each round splits the range around a pivot:
  //
  //   [lo ........ gt_end ........ eq_end ........ hi)
  //      > pivot       == pivot        < pivot
  //
  // and keeps the part t must lie in, so the work shrinks geometrically.
  auto lo = p.begin();
  auto hi = p.end();
  while (true) {
    const auto mid = lo + (hi - lo) / 2;
    const double pivot = std::max(std::min(*lo, *mid), std::min(std::max(*lo, *mid), *(hi - 1)));
    const auto gt_end = std::partition(lo, hi, [pivot](double v) { return v > pivot; });
    const auto eq_end = std::partition(gt_end, hi, [pivot](double v) { return v == pivot; });
    double gt_sum = 0.0;
    for (auto it = lo; it != gt_end; ++it) gt_sum += *it;
    double eq_sum = 0.0;
    for (auto it = gt_end; it != eq_end; ++it) eq_sum += *it;
    if (gt_end != lo && above + gt_sum >= target) {
      hi = gt_end;
    } else if (above + gt_sum + eq_sum >= target || eq_end == hi) {
      return pivot;
    } else {
      above += gt_sum + eq_sum;
      lo = eq_end;
    }
  }
}

// Binary exponent buckets of probabilities in [0, 1]: bucket b holds [2^-(b+1), 2^-b), the last
// one everything smaller (zeros too), so a lower bucket's values all exceed a higher one's.
constexpr int kNumBuckets = 64;

int bucket_of(double p) {
  std::uint64_t bits;
  std::memcpy(&bits, &p, sizeof(bits));
  const int exponent = static_cast<int>(bits >> 52) & 0x7ff;  // 1023 for [1, 2)
  return std::clamp(1022 - exponent, 0, kNumBuckets - 1);
}

}  // namespace

double mass_threshold(std::span<double> p, double target) {
  PAGODA_CHECK(!p.empty()) << "no probabilities";
  // A quickselect's partitions are mostly mispredicted branches. First, one branch-free pass
  // sums the mass per exponent bucket, which finds the bucket t lies in; only that bucket's
  // values go on to the quickselect.
  std::array<double, kNumBuckets> mass{};
  for (const double v : p) mass[static_cast<std::size_t>(bucket_of(v))] += v;
  // The first bucket whose mass brings the running total to the target; when rounding leaves
  // the target above the total, the last bucket with mass, whose smallest value the quickselect
  // then returns.
  double running = 0.0;
  int bucket = -1;
  for (int b = 0; b < kNumBuckets; ++b) {
    if (mass[b] == 0.0) continue;
    bucket = b;
    running += mass[b];
    if (running >= target) break;
  }
  if (bucket < 0) return 0.0;  // all zeros
  double above = 0.0;
  for (int b = 0; b < bucket; ++b) above += mass[b];
  // That bucket's values to the front, without a branch per value.
  std::size_t count = 0;
  for (const double v : p) {
    p[count] = v;
    count += bucket_of(v) == bucket ? 1 : 0;
  }
  return mass_threshold_after(p.first(count), above, target);
}

}  // namespace pagoda::sampling
