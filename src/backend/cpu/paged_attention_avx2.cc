#include "backend/cpu/paged_attention_avx2.h"

#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/weight_blocks_avx2.h"

namespace pagoda::cpu::avx2 {

namespace {

// Four dot products of q with four keys: four independent FMA chains instead of one.
inline void dot4(const float* q, const float* const* keys, std::int64_t head_dim, float* out) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (std::int64_t d = 0; d < head_dim; d += 8) {
    const __m256 qv = _mm256_loadu_ps(q + d);
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(keys[j] + d), acc[j]);
  }
  for (int j = 0; j < 4; ++j) out[j] = horizontal_sum(acc[j]);
}

inline float dot1(const float* q, const float* key, std::int64_t head_dim) {
  __m256 acc = _mm256_setzero_ps();
  for (std::int64_t d = 0; d < head_dim; d += 8) {
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(key + d), acc);
  }
  return horizontal_sum(acc);
}

}  // namespace

void widen_fp16(const std::uint16_t* src, std::int64_t n, float* dst) {
  for (std::int64_t i = 0; i < n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
}

// Per row r = (token t, group head g) the state of an online softmax over the keys seen so far:
// running max m, running sum l of exp(s - m), and acc = sum of exp(s - m) * v. A new chunk of
// scores with max m' > m rescales l and acc by exp(m - m').
//
//   scratch: acc [rows, D] | scores [rows, kKeyChunk] | m [rows] | l [rows]
void attention_tile(const AttentionTile& tile) {
  const std::int64_t head_dim = tile.head_dim;
  const std::int64_t rows = tile.num_queries * tile.group_size;
  float* acc = tile.scratch;
  float* scores = acc + rows * head_dim;
  float* row_max = scores + rows * kKeyChunk;
  float* row_sum = row_max + rows;
  reset_softmax_state(rows, head_dim, acc, row_max, row_sum);

  const std::int64_t last_position = tile.first_position + tile.num_queries - 1;
  const float* keys[kKeyChunk];
  const float* values[kKeyChunk];
  for (std::int64_t key0 = 0; key0 <= last_position; key0 += kKeyChunk) {
    const std::int64_t chunk =
        last_position + 1 - key0 < kKeyChunk ? last_position + 1 - key0 : kKeyChunk;
    gather_kv_rows(tile, key0, chunk, keys, values);
    for (std::int64_t t = 0; t < tile.num_queries; ++t) {
      // Causal: token t sees keys up to its own position; later tokens of the tile see more.
      const std::int64_t visible_to = tile.first_position + t - key0 + 1;
      if (visible_to <= 0) continue;
      const std::int64_t visible = visible_to < chunk ? visible_to : chunk;
      for (std::int64_t g = 0; g < tile.group_size; ++g) {
        const std::int64_t r = t * tile.group_size + g;
        const float* q = tile.q + t * tile.token_stride + g * head_dim;
        float* s = scores + r * kKeyChunk;
        std::int64_t j = 0;
        for (; j + 4 <= visible; j += 4) dot4(q, keys + j, head_dim, s + j);
        for (; j < visible; ++j) s[j] = dot1(q, keys[j], head_dim);
        float chunk_max = -INFINITY;
        for (j = 0; j < visible; ++j) {
          s[j] *= tile.scale;
          chunk_max = s[j] > chunk_max ? s[j] : chunk_max;
        }
        const float new_max = chunk_max > row_max[r] ? chunk_max : row_max[r];
        const float correction = expf(row_max[r] - new_max);
        row_max[r] = new_max;
        float sum = 0.0f;
        j = 0;
        for (; j + 8 <= visible; j += 8) {
          _mm256_storeu_ps(s + j,
                           exp256(_mm256_sub_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(new_max))));
        }
        for (; j < visible; ++j) s[j] = expf(s[j] - new_max);
        for (j = 0; j < visible; ++j) sum += s[j];
        row_sum[r] = row_sum[r] * correction + sum;
        float* a = acc + r * head_dim;
        const __m256 c = _mm256_set1_ps(correction);
        for (std::int64_t d = 0; d < head_dim; d += 8) {
          __m256 av = _mm256_mul_ps(_mm256_loadu_ps(a + d), c);
          for (j = 0; j < visible; ++j) {
            av = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), _mm256_loadu_ps(values[j] + d), av);
          }
          _mm256_storeu_ps(a + d, av);
        }
      }
    }
  }
  for (std::int64_t t = 0; t < tile.num_queries; ++t) {
    for (std::int64_t g = 0; g < tile.group_size; ++g) {
      const std::int64_t r = t * tile.group_size + g;
      const __m256 inv = _mm256_set1_ps(1.0f / row_sum[r]);
      float* o = tile.out + t * tile.token_stride + g * head_dim;
      for (std::int64_t d = 0; d < head_dim; d += 8) {
        _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(acc + r * head_dim + d), inv));
      }
    }
  }
}

}  // namespace pagoda::cpu::avx2
