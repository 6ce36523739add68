#include <immintrin.h>

#include <cmath>

#include "backend/cpu/exp_avx512.h"
#include "backend/cpu/windowed_attention.h"

namespace pagoda::cpu::avx512 {

namespace {

using avx2::kWindowKeyChunk;

inline float dot(const float* q, const float* key, std::int64_t head_dim) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  std::int64_t d = 0;
  for (; d + 32 <= head_dim; d += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(key + d), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d + 16), _mm512_loadu_ps(key + d + 16), acc1);
  }
  if (d < head_dim) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), _mm512_loadu_ps(key + d), acc0);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

void widen(const std::uint16_t* src, std::int64_t n, float* dst) {
  for (std::int64_t i = 0; i < n; i += 16) {
    _mm512_storeu_ps(
        dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
}

}  // namespace

// avx2::windowed_query with 16-lane vectors (head_dim a multiple of 16): the same online softmax
// per group head over chunks of kWindowKeyChunk keys, the same scratch layout.
void windowed_query(const avx2::WindowedQuery& w) {
  const std::int64_t head_dim = w.head_dim;
  const std::int64_t groups = w.group_size;
  float* acc = w.scratch;
  float* scores = acc + groups * head_dim;
  float* row_max = scores + groups * kWindowKeyChunk;
  float* row_sum = row_max + groups;
  float* key_rows = row_sum + groups;
  float* value_rows = key_rows + kWindowKeyChunk * head_dim;
  for (std::int64_t g = 0; g < groups; ++g) {
    row_max[g] = -INFINITY;
    row_sum[g] = 0.0f;
  }
  for (std::int64_t i = 0; i < groups * head_dim; ++i) acc[i] = 0.0f;

  const float* keys[kWindowKeyChunk];
  const float* values[kWindowKeyChunk];
  for (std::int64_t key0 = w.first_key; key0 <= w.last_key; key0 += kWindowKeyChunk) {
    const std::int64_t count =
        w.last_key + 1 - key0 < kWindowKeyChunk ? w.last_key + 1 - key0 : kWindowKeyChunk;
    std::int64_t block = key0 / w.block_size;
    std::int64_t offset = key0 % w.block_size;
    for (std::int64_t j = 0; j < count; ++j) {
      const std::int64_t slot =
          static_cast<std::int64_t>(w.block_table[block]) * w.block_size + offset;
      if (w.k != nullptr) {
        keys[j] = w.k + slot * w.slot_stride;
        values[j] = w.v + slot * w.slot_stride;
      } else {
        widen(w.k_f16 + slot * w.slot_stride, head_dim, key_rows + j * head_dim);
        widen(w.v_f16 + slot * w.slot_stride, head_dim, value_rows + j * head_dim);
        keys[j] = key_rows + j * head_dim;
        values[j] = value_rows + j * head_dim;
      }
      if (++offset == w.block_size) {
        offset = 0;
        ++block;
      }
    }
    for (std::int64_t g = 0; g < groups; ++g) {
      const float* q = w.q + g * head_dim;
      float* s = scores + g * kWindowKeyChunk;
      float chunk_max = -INFINITY;
      for (std::int64_t j = 0; j < count; ++j) {
        float score = dot(q, keys[j], head_dim) * w.scale;
        if (w.softcap != 0.0f) score = w.softcap * std::tanh(score / w.softcap);
        s[j] = score;
        chunk_max = score > chunk_max ? score : chunk_max;
      }
      const float new_max = chunk_max > row_max[g] ? chunk_max : row_max[g];
      const float correction = expf(row_max[g] - new_max);
      row_max[g] = new_max;
      std::int64_t j = 0;
      for (; j + 16 <= count; j += 16) {
        _mm512_storeu_ps(s + j,
                         exp512(_mm512_sub_ps(_mm512_loadu_ps(s + j), _mm512_set1_ps(new_max))));
      }
      for (; j < count; ++j) s[j] = expf(s[j] - new_max);
      float sum = 0.0f;
      for (j = 0; j < count; ++j) sum += s[j];
      row_sum[g] = row_sum[g] * correction + sum;
      float* a = acc + g * head_dim;
      const __m512 c = _mm512_set1_ps(correction);
      for (std::int64_t d = 0; d < head_dim; d += 16) {
        __m512 av = _mm512_mul_ps(_mm512_loadu_ps(a + d), c);
        for (j = 0; j < count; ++j) {
          av = _mm512_fmadd_ps(_mm512_set1_ps(s[j]), _mm512_loadu_ps(values[j] + d), av);
        }
        _mm512_storeu_ps(a + d, av);
      }
    }
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    const __m512 inv = _mm512_set1_ps(1.0f / row_sum[g]);
    float* o = w.out + g * head_dim;
    for (std::int64_t d = 0; d < head_dim; d += 16) {
      _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(acc + g * head_dim + d), inv));
    }
  }
}

}  // namespace pagoda::cpu::avx512
