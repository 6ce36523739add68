// Causal attention of a batch of sequences against a paged KV cache (GQA). One call serves
// prefill, chunked prefill and decode: each sequence brings q_len new query tokens whose K/V are
// already in the cache (write_kv), and its context is its first seq_len cached tokens. Decode
// rows run a tile tuned for a few rows against many keys; prefill rows a matmul-like tile.
#pragma once

#include <cstdint>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu {

/// Where each sequence's queries and keys are. Sequence s owns query tokens
/// [query_start_loc[s], query_start_loc[s+1]) and cached tokens [0, seq_lens[s]); its queries are
/// the last q_len of those tokens, so query i sits at absolute position seq_len - q_len + i and
/// attends to positions 0..that position.
///
///   seq s:  cached positions  0 ........................ seq_len-1
///                             |<- earlier chunks/decode ->|<- q_len ->|
///   position p lives in block block_tables[s, p / block_size], slot offset p % block_size.
struct AttentionBatch {
  const std::int32_t* query_start_loc = nullptr;  ///< [num_seqs + 1], cu_seqlens of the queries.
  const std::int32_t* seq_lens = nullptr;         ///< [num_seqs], tokens in the cache.
  const std::int32_t* block_tables = nullptr;     ///< [num_seqs, max_blocks_per_seq].
  std::int64_t num_seqs = 0;
  std::int64_t max_blocks_per_seq = 0;
};

/// Checks (PAGODA_CHECK) that the batch fits the cache: q heads a multiple of KV heads, each
/// sequence's queries within its tokens and its tokens within its block table.
void check_attention_batch(std::int64_t num_heads, const KvCacheView& cache,
                           const AttentionBatch& batch);

/// Queries (tokens) from which a sequence runs the prefill tile (prefill_attention.h) for all its
/// queries but those in its last KV block; shorter ones, and those, run the decode tile
/// (paged_attention_avx2.h). Each tile gives a row the same bits whatever else shares it, and
/// the two agree to fp32 rounding, so a row's bits follow from its query count and position:
/// every speculative verification pass (at most 16 draft tokens + 1, kMaxSpeculativeTokens in
/// spec/speculative_config.h) scores its tokens as their one-token decodes do, and a prompt's
/// last block, which a request whose earlier blocks are prefix-cached computes alone, as in the
/// request that cached them. The prefill tile already wins from ~4 queries at 3 q heads per KV
/// head (docs/perf/cpu.md, "Prefill attention").
inline constexpr std::int64_t kPrefillMinQueries = 18;

/// out = softmax(q K^T / sqrt(head_dim), causal) V per sequence; q head j reads KV head
/// j / (num_heads / num_kv_heads). Online softmax in fp32; each KV head is read once per tile
/// of queries for its whole group of q heads. Needs AVX2 and head_dim % 8 == 0 for the tiles;
/// otherwise runs paged_attention_reference.
void paged_attention(ThreadPool& pool, const float* q /* [num_tokens, num_heads, head_dim] */,
                     std::int64_t num_heads, const KvCacheView& cache, const AttentionBatch& batch,
                     float* out /* [num_tokens, num_heads, head_dim] */);

/// Oracle: dense causal softmax(q K^T) V per sequence and head, in double.
void paged_attention_reference(const float* q /* [num_tokens, num_heads, head_dim] */,
                               std::int64_t num_heads, const KvCacheView& cache,
                               const AttentionBatch& batch,
                               float* out /* [num_tokens, num_heads, head_dim] */);

}  // namespace pagoda::cpu
