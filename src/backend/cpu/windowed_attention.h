// Paged causal attention with the score options some architectures add to Llama's: a softmax
// scale other than head_dim^-1/2 (Gemma's query_pre_attn_scalar), a sliding window (Gemma 3's
// local layers, Mistral's) and a logit soft-cap (Gemma 2). The same batch layout as
// paged_attention (paged_attention.h), which stays the path of plain causal attention.
//
// A query at absolute position p attends to the cached positions j with
//
//   lo(p) <= j <= p,   lo(p) = max(0, p - sliding_window + 1)   (0 without a window)
//
//   positions  0 ............ lo(p) ........................ p
//                             |<------ sliding_window ------>|
//
// and its scores are s = (q . k) * scale, then s = cap * tanh(s / cap) with a soft-cap.
#pragma once

#include <cstdint>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu {

/// How scores are made and which keys a query sees.
struct ScoreOptions {
  float scale = 0.0f;               ///< 0: 1/sqrt(head_dim)
  std::int64_t sliding_window = 0;  ///< 0: every earlier position; else the last this many
  float logit_softcap = 0.0f;       ///< 0: none
};

/// out = softmax(scores(q, K) masked to [lo(p), p]) V per sequence, q head j reading KV head
/// j / (num_heads / num_kv_heads); online softmax in fp32, each query token's group of q heads
/// computed together so a K/V row is loaded once for the group. Needs AVX2 and head_dim % 8 == 0
/// for the vector path (AVX-512 where the CPU has it and head_dim % 16 == 0); otherwise runs
/// windowed_attention_reference.
void windowed_attention(ThreadPool& pool, const float* q /* [num_tokens, num_heads, head_dim] */,
                        std::int64_t num_heads, const KvCacheView& cache,
                        const AttentionBatch& batch, const ScoreOptions& options,
                        float* out /* [num_tokens, num_heads, head_dim] */);

/// Oracle: dense masked softmax per sequence, token and head, in double.
void windowed_attention_reference(const float* q /* [num_tokens, num_heads, head_dim] */,
                                  std::int64_t num_heads, const KvCacheView& cache,
                                  const AttentionBatch& batch, const ScoreOptions& options,
                                  float* out /* [num_tokens, num_heads, head_dim] */);

namespace avx2 {

/// Keys scored and folded into the online softmax at a time.
inline constexpr std::int64_t kWindowKeyChunk = 32;

/// One query token with all q heads of one KV head's group. Plain data.
struct WindowedQuery {
  const float* q;                   ///< Group head g at q + g * head_dim.
  float* out;                       ///< Laid out as q.
  std::int64_t group_size;          ///< q heads per KV head.
  std::int64_t head_dim;            ///< A multiple of 8.
  std::int64_t first_key;           ///< lo(p).
  std::int64_t last_key;            ///< p.
  float scale;                      ///< Softmax scale.
  float softcap;                    ///< 0: none.
  const float* k;                   ///< This KV head at slot 0 (fp32 cache), else null.
  const float* v;                   ///< As k.
  const std::uint16_t* k_f16;       ///< This KV head at slot 0 (fp16 cache), else null.
  const std::uint16_t* v_f16;       ///< As k_f16.
  std::int64_t slot_stride;         ///< num_kv_heads * head_dim.
  const std::int32_t* block_table;  ///< This sequence's blocks.
  std::int64_t block_size;
  float* scratch;  ///< windowed_query_scratch_floats(group_size, head_dim) floats.
};

/// Floats of WindowedQuery::scratch.
constexpr std::int64_t windowed_query_scratch_floats(std::int64_t group_size,
                                                     std::int64_t head_dim) {
  return group_size * (head_dim + kWindowKeyChunk + 2) + 2 * kWindowKeyChunk * head_dim;
}

/// Computes the query's group of output rows. Call only when cpu_has_avx2().
void windowed_query(const WindowedQuery& query);

}  // namespace avx2

namespace avx512 {

/// avx2::windowed_query with 16-lane vectors; head_dim a multiple of 16. Call only when
/// cpu_has_avx512().
void windowed_query(const avx2::WindowedQuery& query);

}  // namespace avx512

}  // namespace pagoda::cpu
