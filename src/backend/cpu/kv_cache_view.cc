#include "backend/cpu/kv_cache_view.h"

#include <cstring>

#include "common/check.h"

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
    std::memcpy(cache.k + slot * stride, k + t * stride, bytes);
    std::memcpy(cache.v + slot * stride, v + t * stride, bytes);
  }
}

}  // namespace pagoda::cpu
