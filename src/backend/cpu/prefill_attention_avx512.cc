#include <immintrin.h>

#include "backend/cpu/exp_avx512.h"
#include "backend/cpu/prefill_attention.h"
#include "backend/cpu/prefill_attention_tile.h"

namespace pagoda::cpu::avx512 {

namespace {

// 48 rows: the score micro-kernel holds 8 keys x 3 row vectors = 24 accumulators, the value
// micro-kernel 6 rows x 4 vectors of head dims = 24, of the 32 zmm registers. 64 rows (6 keys x
// 4 vectors), other value shapes (4 or 8 rows) and key blocks of 32 or 128 measured the same or
// slower; 9 keys spill.
struct Isa {
  using Vec = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kRowVecs = 3;
  static constexpr int kScoreKeys = 8;
  static constexpr int kValueRows = 6;
  static constexpr int kValueVecs = 4;
  static constexpr int kKeyBlock = 64;

  static Vec load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec exp(Vec x) { return exp512(x); }
  static Vec hide_after(Vec s, const std::int32_t* position, std::int64_t key) {
    const __mmask16 hidden = _mm512_cmplt_epi32_mask(
        _mm512_loadu_si512(position), _mm512_set1_epi32(static_cast<std::int32_t>(key)));
    return _mm512_mask_mov_ps(s, hidden, _mm512_set1_ps(-INFINITY));
  }
  static Vec zero_hidden(Vec p, Vec s) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(s, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ), p);
  }
  static void widen(const std::uint16_t* src, std::int64_t n, float* dst) {
    for (std::int64_t i = 0; i < n; i += 8) {
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  }
};

static_assert(PrefillKernel<Isa>::kRows == kPrefillRows);

}  // namespace

std::int64_t prefill_tile_scratch_floats(std::int64_t head_dim) {
  return PrefillKernel<Isa>::scratch_floats(head_dim);
}

void prefill_tile(const PrefillTile& tile) {
  PrefillKernel<Isa>::run(tile);
}

}  // namespace pagoda::cpu::avx512
