#include <immintrin.h>

#include "backend/cpu/exp_avx2.h"
#include "backend/cpu/prefill_attention.h"
#include "backend/cpu/prefill_attention_tile.h"

namespace pagoda::cpu::avx2 {

namespace {

// 24 rows: the score micro-kernel holds 4 keys x 3 row vectors = 12 accumulators, the value
// micro-kernel 4 rows x 3 vectors of head dims = 12, of the 16 ymm registers (the loaded query or
// value vectors and a broadcast take the rest). Of the shapes tried, (keys, rows, vectors) =
// (3, 2, 4), (4, 2, 4), (3, 3, 4), (4, 4, 2), (4, 6, 2), (4, 3, 2) and (4, 8, 2) were 3-12% slower.
struct Isa {
  using Vec = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kRowVecs = 3;
  static constexpr int kScoreKeys = 4;
  static constexpr int kValueRows = 4;
  static constexpr int kValueVecs = 3;
  static constexpr int kKeyBlock = 64;

  static Vec load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec exp(Vec x) { return exp256(x); }
  static Vec hide_after(Vec s, const std::int32_t* position, std::int64_t key) {
    const __m256i hidden =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<std::int32_t>(key)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(position)));
    return _mm256_blendv_ps(s, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(hidden));
  }
  static Vec zero_hidden(Vec p, Vec s) {
    return _mm256_and_ps(p, _mm256_cmp_ps(s, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ));
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

}  // namespace pagoda::cpu::avx2
