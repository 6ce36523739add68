#include "backend/cpu/paged_attention_avx512.h"

#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_avx512.h"

namespace pagoda::cpu::avx512 {

namespace {

constexpr int kLanes = 16;
static_assert(avx2::kKeyChunk == kLanes, "one zmm of scores per key chunk");
static_assert(kKeyBlock <= avx2::kMaxGatherKeys, "a key block is one gather");
// Head dimensions per value pass: 4 vectors x up to 4 heads = 16 accumulators.
constexpr std::int64_t kPassLanes = 4 * kLanes;

// Lane j of join_halves(sum_half(v), sum_half(v + 8)) is the sum of the 16 lanes of v[j]: a
// transposing tree of 45 shuffles and adds instead of 16 separate horizontal sums, in two halves
// so keys 0-7 are reduced before keys 8-15 are scored (score_chunk keeps only 8 keys'
// accumulators per head):
//
//   sum_half(v[0..7]), levels 1-3:
//     level 1: v[2i], v[2i+1]    -> per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3]
//     level 2: pairs of those    -> per 128-bit lane L: sums over L of keys 4i..4i+3
//     level 3: 128-bit lanes     -> keys 0-7, each summed over two 128-bit lanes
//   join_halves(h0, h1), level 4: lane L of the result: keys 4L..4L+3 summed over all of v
inline __m512 sum_half(const __m512 v[kLanes / 2]) {
  __m512 t[4];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  __m512 u[2];
  for (int i = 0; i < 2; ++i) {
    const __m512d c = _mm512_castps_pd(t[2 * i]);
    const __m512d d = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(c, d)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(c, d)));
  }
  // 0x88 picks 128-bit lanes (0, 2 | 0, 2) of (a | b), 0xDD picks (1, 3 | 1, 3).
  return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88),
                       _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
}

inline __m512 join_halves(__m512 low, __m512 high) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(low, high, 0x88),
                       _mm512_shuffle_f32x4(low, high, 0xDD));
}

// A row of zeros standing in for keys and values past a token's visible ones, so every loop
// below runs all 16 lanes with no per-lane branch and gives the same bits whatever the tile.
alignas(64) constexpr float kZeroRow[kMaxHeadDim] = {};
alignas(64) constexpr std::uint16_t kZeroHalfRow[kMaxHeadDim] = {};

inline const float* zero_row(const float*) {
  return kZeroRow;
}
inline const std::uint16_t* zero_row(const std::uint16_t*) {
  return kZeroHalfRow;
}

// 16 cached K or V elements as fp32: an fp16 cache is widened in the load (exact), so the loops
// below read half the bytes and otherwise run the same arithmetic.
inline __m512 load_row(const float* p) {
  return _mm512_loadu_ps(p);
}
inline __m512 load_row(const std::uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Scores of kHeads query rows (q, q + head_dim, ...) against the chunk's 16 keys (zero rows past
// `visible`), scaled; lanes past `visible` are -inf. Each key vector is loaded once for all the
// heads that share it (grouped-query attention), in two halves of 8 keys so the kHeads x 8 dot
// accumulators stay in registers; per head and key the FMAs and the reduction tree are those of
// one head alone, so the scores do not depend on kHeads.
template <int kHeads, typename T>
inline void score_chunk(const float* q, const T* const* keys, std::int64_t visible,
                        std::int64_t head_dim, float scale, __m512 out[kHeads]) {
  constexpr int kHalf = kLanes / 2;
  __m512 halves[kHeads][2];
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    __m512 dots[kHeads][kHalf];
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 8
      for (int j = 0; j < kHalf; ++j) dots[h][j] = _mm512_setzero_ps();
    }
    for (std::int64_t d = 0; d < head_dim; d += kLanes) {
#pragma GCC unroll 8
      for (int j = 0; j < kHalf; ++j) {
        const __m512 key = load_row(keys[half * kHalf + j] + d);
#pragma GCC unroll 4
        for (int h = 0; h < kHeads; ++h) {
          dots[h][j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * head_dim + d), key, dots[h][j]);
        }
      }
    }
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) halves[h][half] = sum_half(dots[h]);
  }
  const auto mask = static_cast<__mmask16>((1u << visible) - 1);
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
    out[h] = _mm512_mask_mov_ps(
        _mm512_set1_ps(-INFINITY), mask,
        _mm512_mul_ps(join_halves(halves[h][0], halves[h][1]), _mm512_set1_ps(scale)));
  }
}

// acc[r0 + h, d0 : d0 + 16 kVecs] = correction[h] * acc + sum over j < visible of
// p[h, j] * V[j, same lanes]. Each key's kVecs vectors serve kHeads heads, and the kHeads x kVecs
// accumulators are independent chains, so the FMAs issue back to back instead of waiting on one
// accumulator's latency.
template <int kHeads, int kVecs, typename T>
void value_pass(float* acc, std::int64_t r0, std::int64_t head_dim, std::int64_t d0,
                const float* correction, const T* const* values, std::int64_t visible,
                const float* probs /* [kHeads, kKeyBlock] */) {
  __m512 a[kHeads][kVecs];
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      a[h][v] = _mm512_mul_ps(_mm512_loadu_ps(acc + (r0 + h) * head_dim + d0 + v * kLanes),
                              _mm512_set1_ps(correction[h]));
    }
  }
  for (std::int64_t j = 0; j < visible; ++j) {
    __m512 vv[kVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) vv[v] = load_row(values[j] + d0 + v * kLanes);
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
      const __m512 p = _mm512_set1_ps(probs[h * kKeyBlock + j]);
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) a[h][v] = _mm512_fmadd_ps(p, vv[v], a[h][v]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
    for (int v = 0; v < kVecs; ++v) {
      _mm512_storeu_ps(acc + (r0 + h) * head_dim + d0 + v * kLanes, a[h][v]);
    }
  }
}

// One token's kHeads query heads (rows r0..r0+kHeads-1) against the `visible` keys of a block:
// all scores first (chunks of 16 are independent, so the core overlaps them), one max, one
// rescale of the running state, then acc += p · V with each V vector loaded once for all heads.
template <int kHeads, typename T>
void heads_block(const avx2::AttentionTile& tile, const float* q, std::int64_t r0,
                 const T* const* keys, const T* const* values, std::int64_t visible, float* acc,
                 float* scores /* [kHeads, kKeyBlock] */, float* row_max, float* row_sum) {
  const std::int64_t head_dim = tile.head_dim;
  const std::int64_t num_chunks = (visible + kLanes - 1) / kLanes;
  // Heads scored together per key load: 3 x 8 dot accumulators fit the 32 registers, 4 x 8 not.
  constexpr int kShare = kHeads == 4 ? 2 : kHeads;
  __m512 max_v[kHeads];
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) max_v[h] = _mm512_set1_ps(-INFINITY);
  for (std::int64_t c = 0; c < num_chunks; ++c) {
    const std::int64_t in_chunk = visible - c * kLanes < kLanes ? visible - c * kLanes : kLanes;
    // K/V rows come from DRAM (a layer's cache was last read a whole step ago) in runs of a few
    // hundred bytes scattered over the pool, and a demand miss per row leaves the core waiting:
    // while chunk c is scored, ask for its value rows (read after every score) and chunk c+1's
    // keys. -12% on a cold 16-way layer; +20% when K/V sit in L3 (BM_AttentionDecodeLayers vs
    // BM_AttentionDecode/16/192). Written inline: GCC drops calls to a helper that only
    // prefetches, as a function without side effects.
    const std::int64_t row_bytes = head_dim * static_cast<std::int64_t>(sizeof(T));
    for (std::int64_t j = 0; j < in_chunk; ++j) {
      const char* v = reinterpret_cast<const char*>(values[c * kLanes + j]);
      for (std::int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(v + b, 0, 3);
    }
    const std::int64_t next = (c + 1) * kLanes;
    const std::int64_t next_rows = visible - next < kLanes ? visible - next : kLanes;
    for (std::int64_t j = 0; j < next_rows; ++j) {
      const char* k = reinterpret_cast<const char*>(keys[next + j]);
      for (std::int64_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(k + b, 0, 3);
    }
    const T* chunk_keys[kLanes];
    for (std::int64_t j = 0; j < kLanes; ++j) {
      chunk_keys[j] = j < in_chunk ? keys[c * kLanes + j] : zero_row(keys[0]);
    }
    __m512 sv[kHeads];
#pragma GCC unroll 2
    for (int h0 = 0; h0 < kHeads; h0 += kShare) {
      score_chunk<kShare>(q + h0 * head_dim, chunk_keys, in_chunk, head_dim, tile.scale, sv + h0);
    }
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
      max_v[h] = _mm512_max_ps(max_v[h], sv[h]);
      _mm512_storeu_ps(scores + h * kKeyBlock + c * kLanes, sv[h]);
    }
  }
  float correction[kHeads];
#pragma GCC unroll 4
  for (int h = 0; h < kHeads; ++h) {
    const std::int64_t r = r0 + h;
    float* s = scores + h * kKeyBlock;
    const float block_max = _mm512_reduce_max_ps(max_v[h]);
    const float new_max = block_max > row_max[r] ? block_max : row_max[r];
    correction[h] = expf(row_max[r] - new_max);
    row_max[r] = new_max;
    __m512 sum_v = _mm512_setzero_ps();
    for (std::int64_t c = 0; c < num_chunks; ++c) {
      // Masked lanes (-inf) must weigh exactly 0: exp512 floors at 2^-126.
      const std::int64_t in_chunk = visible - c * kLanes < kLanes ? visible - c * kLanes : kLanes;
      const __m512 sv = _mm512_loadu_ps(s + c * kLanes);
      const __m512 p = _mm512_maskz_mov_ps(static_cast<__mmask16>((1u << in_chunk) - 1),
                                           exp512(_mm512_sub_ps(sv, _mm512_set1_ps(new_max))));
      sum_v = _mm512_add_ps(sum_v, p);
      _mm512_storeu_ps(s + c * kLanes, p);
    }
    row_sum[r] = row_sum[r] * correction[h] + _mm512_reduce_add_ps(sum_v);
  }
  for (std::int64_t d0 = 0; d0 < head_dim; d0 += kPassLanes) {
    switch (head_dim - d0 < kPassLanes ? (head_dim - d0) / kLanes : kPassLanes / kLanes) {
      case 1:
        value_pass<kHeads, 1, T>(acc, r0, head_dim, d0, correction, values, visible, scores);
        break;
      case 2:
        value_pass<kHeads, 2, T>(acc, r0, head_dim, d0, correction, values, visible, scores);
        break;
      case 3:
        value_pass<kHeads, 3, T>(acc, r0, head_dim, d0, correction, values, visible, scores);
        break;
      default:
        value_pass<kHeads, 4, T>(acc, r0, head_dim, d0, correction, values, visible, scores);
        break;
    }
  }
}

// The tile over K/V rows of type T (float, or fp16 bits).
template <typename T>
void attention_tile_of(const avx2::AttentionTile& tile) {
  const std::int64_t head_dim = tile.head_dim;
  const std::int64_t rows = tile.num_queries * tile.group_size;
  float* acc = tile.scratch;
  float* scores = acc + rows * head_dim;
  float* row_max = scores + kHeadsPerPass * kKeyBlock;
  float* row_sum = row_max + rows;
  avx2::reset_softmax_state(rows, head_dim, acc, row_max, row_sum);

  const std::int64_t last_position = tile.first_position + tile.num_queries - 1;
  const T* keys[kKeyBlock];
  const T* values[kKeyBlock];
  for (std::int64_t key0 = 0; key0 <= last_position; key0 += kKeyBlock) {
    const std::int64_t block =
        last_position + 1 - key0 < kKeyBlock ? last_position + 1 - key0 : kKeyBlock;
    avx2::gather_kv_rows(tile, key0, block, keys, values);
    for (std::int64_t t = 0; t < tile.num_queries; ++t) {
      // Causal: token t sees keys up to its own position; later tokens of the tile see more.
      const std::int64_t visible_to = tile.first_position + t - key0 + 1;
      if (visible_to <= 0) continue;
      const std::int64_t visible = visible_to < block ? visible_to : block;
      for (std::int64_t g0 = 0; g0 < tile.group_size; g0 += kHeadsPerPass) {
        const std::int64_t r0 = t * tile.group_size + g0;
        const float* q = tile.q + t * tile.token_stride + g0 * head_dim;
        switch (tile.group_size - g0 < kHeadsPerPass ? tile.group_size - g0 : kHeadsPerPass) {
          case 1:
            heads_block<1>(tile, q, r0, keys, values, visible, acc, scores, row_max, row_sum);
            break;
          case 2:
            heads_block<2>(tile, q, r0, keys, values, visible, acc, scores, row_max, row_sum);
            break;
          case 3:
            heads_block<3>(tile, q, r0, keys, values, visible, acc, scores, row_max, row_sum);
            break;
          default:
            heads_block<4>(tile, q, r0, keys, values, visible, acc, scores, row_max, row_sum);
            break;
        }
      }
    }
  }
  for (std::int64_t t = 0; t < tile.num_queries; ++t) {
    for (std::int64_t g = 0; g < tile.group_size; ++g) {
      const std::int64_t r = t * tile.group_size + g;
      const __m512 inv = _mm512_set1_ps(1.0f / row_sum[r]);
      float* o = tile.out + t * tile.token_stride + g * head_dim;
      for (std::int64_t d = 0; d < head_dim; d += kLanes) {
        _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(acc + r * head_dim + d), inv));
      }
    }
  }
}

}  // namespace

// Per row r = (token t, group head g) the state of a softmax over the keys seen so far, kept
// across blocks of kKeyBlock keys: running max m, running sum l of exp(s - m), and
// acc = sum of exp(s - m) * v. Within a block all scores are computed before any exp (two
// passes), so only a new block with max m' > m rescales l and acc by exp(m - m'). Blocks and
// chunks start at absolute key positions, so a row's arithmetic depends only on its position.
//
//   scratch: acc [rows, D] | scores [kHeadsPerPass, kKeyBlock] | m [rows] | l [rows]
void attention_tile(const avx2::AttentionTile& tile) {
  if (tile.k_f16 != nullptr) {
    attention_tile_of<std::uint16_t>(tile);
  } else {
    attention_tile_of<float>(tile);
  }
}

}  // namespace pagoda::cpu::avx512
