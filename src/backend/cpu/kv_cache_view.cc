#include "backend/cpu/kv_cache_view.h"

#include <cstring>

#include "common/check.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"

namespace pagoda::cpu {

void write_kv(const float* k, const float* v, const std::int64_t* slot_mapping,
              std::int64_t num_tokens, const KvCacheView& cache) {
  const std::int64_t stride = cache.slot_stride();
  const std::int64_t num_slots = cache.num_blocks * cache.block_size;
  const auto bytes = static_cast<std::size_t>(stride) * sizeof(float);
  for (std::int64_t t = 0; t < num_tokens; ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot < 0) continue;
    PAGODA_CHECK_LT(slot, num_slots) << "slot of token " << t;
    if (cache.dtype == KvDtype::kF16) {
      for (std::int64_t i = 0; i < stride; ++i) {
        cache.k_f16[slot * stride + i] = quant::float_to_fp16(k[t * stride + i]);
        cache.v_f16[slot * stride + i] = quant::float_to_fp16(v[t * stride + i]);
      }
      continue;
    }
    std::memcpy(cache.k + slot * stride, k + t * stride, bytes);
    std::memcpy(cache.v + slot * stride, v + t * stride, bytes);
  }
}

float kv_at(const KvCacheView& cache, bool value, std::int64_t slot, std::int64_t h,
            std::int64_t d) {
  const std::int64_t i = slot * cache.slot_stride() + h * cache.head_dim + d;
  if (cache.dtype == KvDtype::kF16) return fp16_to_float((value ? cache.v_f16 : cache.k_f16)[i]);
  return (value ? cache.v : cache.k)[i];
}

}  // namespace pagoda::cpu
