#include "sampling/vocab_scan_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "backend/cpu/elementwise_avx2.h"
#include "backend/cpu/exp_avx2.h"
#include "sampling/vocab_scan.h"

namespace pagoda::sampling::avx2 {
namespace {

float horizontal_max(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

// random_draw.h's mix32 in 8 lanes.
__m256i mix32(__m256i x) {
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(0x7feb352d));
  x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
  x = _mm256_mullo_epi32(x, _mm256_set1_epi32(static_cast<int>(0x846ca68bU)));
  return _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
}

// Natural log of positive normal floats, Cephes' logf: x = m * 2^e with m in [sqrt(1/2), sqrt(2)),
// log(m) = f - f^2/2 + f^3 P(f) for f = m - 1, and e * ln 2 split in two parts so the sum keeps
// full precision. Within 1 ulp of logf.
__m256 log256(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  // m in [0.5, 1) and x = m * 2^e.
  const __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
  __m256 e =
      _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  // Below sqrt(1/2), take 2m (f = 2m - 1, exact) and e - 1.
  const __m256 below = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  const __m256 f = _mm256_add_ps(_mm256_sub_ps(m, _mm256_set1_ps(1.0f)), _mm256_and_ps(m, below));
  e = _mm256_sub_ps(e, _mm256_and_ps(_mm256_set1_ps(1.0f), below));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = _mm256_set1_ps(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(z, _mm256_set1_ps(0.5f), y);
  return _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), _mm256_add_ps(f, y));
}

// token_bits(key, id) for 8 ids (random_draw.h).
__m256i token_bits(__m256i k0, __m256i k1, __m256i id) {
  return mix32(_mm256_add_epi32(mix32(_mm256_xor_si256(id, k0)), k1));
}

// -log(-log(u)) for the uniforms of 8 hashes: the same u as random_draw.h's bits_to_uniform.
__m256 gumbel_of_bits(__m256i bits) {
  const __m256 u = _mm256_mul_ps(
      _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bits, 9)), _mm256_set1_ps(0.5f)),
      _mm256_set1_ps(0x1p-23f));
  const __m256 w = _mm256_sub_ps(_mm256_setzero_ps(), log256(u));
  return _mm256_sub_ps(_mm256_setzero_ps(), log256(w));
}

// race_min_mantissa (vocab_scan.h) of 8 deficits; a NaN or out-of-range product converts to
// INT_MIN and clamps to 0 (any mantissa), as the scalar version.
__m256i race_min_mantissa(__m256 deficit) {
  __m256i k = _mm256_cvttps_epi32(_mm256_mul_ps(deficit, _mm256_set1_ps(1.44269504f)));
  k = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_setzero_si256()), _mm256_set1_epi32(24));
  const __m256i one = _mm256_set1_epi32(1 << 23);
  return _mm256_sub_epi32(one, _mm256_srlv_epi32(one, k));
}

// Lane indices that move the set lanes of an 8-bit mask to the front, in order.
struct LeftPackTable {
  std::uint8_t lanes[256][8];
};

constexpr LeftPackTable make_left_pack_table() {
  LeftPackTable table{};
  for (int mask = 0; mask < 256; ++mask) {
    int next = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if (mask & (1 << lane)) table.lanes[mask][next++] = static_cast<std::uint8_t>(lane);
    }
  }
  return table;
}

constexpr LeftPackTable kLeftPack = make_left_pack_table();

}  // namespace

std::int64_t argmax_index(const float* x, std::int64_t n) {
  const float best = cpu::avx2::max_value(x, n);
  const __m256 b = _mm256_set1_ps(best);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
    if (mask != 0) return i + __builtin_ctz(static_cast<unsigned>(mask));
  }
  for (; i < n; ++i) {
    if (x[i] == best) return i;
  }
  return 0;  // only NaNs
}

std::int64_t gumbel_race(const float* x, std::int64_t n, float scale, const std::int32_t* ids,
                         std::uint64_t key) {
  const __m256i k0 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(key)));
  const __m256i k1 = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(key >> 32)));
  const __m256 scale8 = _mm256_set1_ps(scale);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  float best = -INFINITY;
  float cutoff = -INFINITY;
  std::int64_t best_i = 0;
  // Scores s + g of the 8 tokens from index i; blocks arrive in ascending i and a block wins only
  // with a strictly better score, so ties go to the lowest index.
  float bound = -INFINITY;  // race_bound(best)
  const auto run_block = [&](__m256 s, const std::int32_t* block_ids, std::int64_t i) {
    const __m256i id = block_ids != nullptr
                           ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_ids))
                           : _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), lane);
    const __m256i bits = token_bits(k0, k1, id);
    // m >= min  <=>  m > min - 1 (both below 2^24, so the signed compare is exact).
    const __m256i min_mantissa = race_min_mantissa(_mm256_sub_ps(_mm256_set1_ps(bound), s));
    const __m256i viable = _mm256_cmpgt_epi32(_mm256_srli_epi32(bits, 9),
                                              _mm256_sub_epi32(min_mantissa, _mm256_set1_epi32(1)));
    if (_mm256_movemask_ps(_mm256_castsi256_ps(viable)) == 0) return;
    const __m256 score = _mm256_add_ps(s, gumbel_of_bits(bits));
    const float block_best = horizontal_max(score);
    if (!(block_best > best)) return;
    const int at = _mm256_movemask_ps(_mm256_cmp_ps(score, _mm256_set1_ps(block_best), _CMP_EQ_OQ));
    best = block_best;
    best_i = i + __builtin_ctz(static_cast<unsigned>(at));
    cutoff = race_cutoff(best);
    bound = race_bound(best);
  };
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale8);
    // Most blocks hold no token close enough to the best score to win.
    if (_mm256_movemask_ps(_mm256_cmp_ps(s, _mm256_set1_ps(cutoff), _CMP_GE_OQ)) == 0) continue;
    run_block(s, ids != nullptr ? ids + i : nullptr, i);
  }
  if (i < n) {
    // The tail as one block padded with -inf scores.
    alignas(32) float tail_x[8];
    alignas(32) std::int32_t tail_ids[8] = {};
    for (int j = 0; j < 8; ++j) {
      tail_x[j] = i + j < n ? x[i + j] : -INFINITY;
      if (ids != nullptr && i + j < n) tail_ids[j] = ids[i + j];
    }
    run_block(_mm256_mul_ps(_mm256_load_ps(tail_x), scale8), ids != nullptr ? tail_ids : nullptr,
              i);
  }
  return best_i;
}

double sum_exp_scaled(const float* x, std::int64_t n, float scale, float shift) {
  using cpu::avx2::exp256;
  const __m256 scale8 = _mm256_set1_ps(scale);
  const __m256 shift8 = _mm256_set1_ps(shift);
  const auto term = [&](const float* at) {
    return exp256(_mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(at), scale8), shift8));
  };
  double total = 0.0;
  std::int64_t i = 0;
  // Blocks of 128: each lane of the two accumulators adds 8 terms in [0, 1] in fp32, then the
  // block joins the double total.
  while (i + 16 <= n) {
    __m256 a0 = _mm256_setzero_ps();
    __m256 a1 = _mm256_setzero_ps();
    const std::int64_t end = std::min(n - 15, i + 128);
    for (; i < end; i += 16) {
      a0 = _mm256_add_ps(a0, term(x + i));
      a1 = _mm256_add_ps(a1, term(x + i + 8));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(a0, a1));
    for (const float lane : lanes) total += lane;
  }
  for (; i < n; ++i) total += std::exp(double{x[i] * scale} - double{shift});
  return total;
}

std::size_t gather_at_least(const float* x, std::int64_t n, float scale, float floor, float* s,
                            std::int32_t* ids) {
  const __m256 scale8 = _mm256_set1_ps(scale);
  const __m256 floor8 = _mm256_set1_ps(floor);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::size_t count = 0;
  // Each block stores all 8 lanes, the kept ones packed to the front, and the count moves by how
  // many were kept; a group of 4 blocks with none kept (most, for a high floor) is skipped on
  // one branch, which a low floor's dense candidates would mispredict per block.
  const auto pack = [&](__m256 v, std::int64_t i, unsigned mask) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(kLeftPack.lanes[mask]));
    const __m256i order = _mm256_cvtepu8_epi32(bytes);
    const __m256i id = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), lane);
    _mm256_storeu_ps(s + count, _mm256_permutevar8x32_ps(v, order));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(ids + count),
                        _mm256_permutevar8x32_epi32(id, order));
    count += static_cast<std::size_t>(__builtin_popcount(mask));
  };
  const auto kept = [&](__m256 v) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, floor8, _CMP_GE_OQ)));
  };
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v[4];
    unsigned mask[4];
    for (int b = 0; b < 4; ++b) {
      v[b] = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * b), scale8);
      mask[b] = kept(v[b]);
    }
    if ((mask[0] | mask[1] | mask[2] | mask[3]) == 0) continue;
    for (int b = 0; b < 4; ++b) pack(v[b], i + 8 * b, mask[b]);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), scale8);
    pack(v, i, kept(v));
  }
  if (i < n) {
    alignas(32) float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = i + j < n ? x[i + j] : -INFINITY;
    const __m256 v = _mm256_mul_ps(_mm256_load_ps(tail), scale8);
    // Padding lanes stay out even when the floor is -inf.
    pack(v, i, kept(v) & ((1u << (n - i)) - 1));
  }
  return count;
}

void exp_shifted(const float* s, std::int64_t n, float shift, double* p) {
  using cpu::avx2::exp256;
  const __m256 shift8 = _mm256_set1_ps(shift);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    // exp256 clamps its input, so a masked token would get 2^-126: keep it at 0.
    const __m256 e = _mm256_andnot_ps(_mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ),
                                      exp256(_mm256_sub_ps(v, shift8)));
    _mm256_storeu_pd(p + i, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    _mm256_storeu_pd(p + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  for (; i < n; ++i) p[i] = std::exp(s[i] - shift);
}

void append_greater(const float* x, std::int64_t begin, std::int64_t end, float threshold,
                    std::vector<float>& out) {
  const __m256 t = _mm256_set1_ps(threshold);
  std::int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    auto mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ)));
    for (; mask != 0; mask &= mask - 1) out.push_back(x[i + __builtin_ctz(mask)]);
  }
  for (; i < end; ++i) {
    if (x[i] > threshold) out.push_back(x[i]);
  }
}

}  // namespace pagoda::sampling::avx2
