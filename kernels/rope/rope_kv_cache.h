// RoPE on the new q and k, and the append of k and v into the paged KV cache, in one pass over
// the fused QKV projection's output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "kernels/common/paged_kv_cache.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// Which dimensions form a rotated pair (the same two conventions as cpu::RopeStyle).
enum class RopeStyle : std::uint8_t {
  kRotateHalf,     ///< HF / NeoX: (i, i + head_dim/2).
  kAdjacentPairs,  ///< GPT-J / llama.cpp-converted GGUF: (2i, 2i + 1).
};

struct RopeKvCacheParams {
  /// [num_tokens, qkv_row_stride]: q heads at column 0, k heads at num_heads * head_dim, v heads
  /// at (num_heads + num_kv_heads) * head_dim. q is rotated in place; k and v are only stored.
  void* qkv = nullptr;
  std::int64_t qkv_row_stride = 0;             ///< elements from one token's row to the next
  const std::int32_t* positions = nullptr;     ///< [num_tokens]
  const std::int64_t* slot_mapping = nullptr;  ///< [num_tokens]; < 0: padding, nothing stored
  const float* inv_freq = nullptr;             ///< [head_dim / 2], scaling already applied
  PagedKvCache cache;  ///< elements like qkv, or FP8 codes (bf16/f16 qkv only)
  std::int64_t num_tokens = 0;
  std::int64_t num_heads = 0;
  RopeStyle style = RopeStyle::kRotateHalf;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
};

/// Rotates q (in place) and k by positions[t] * inv_freq[i] (fp32, rounded once), stores the
/// rotated k and the v of token t at slot_mapping[t]: as they are, or into an FP8 cache as
/// e4m3(x / scale) of the values rounded to dtype (round to nearest even, saturated).
Status launch_rope_kv_cache(const RopeKvCacheParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
