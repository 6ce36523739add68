#include "backend/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/paged_attention_avx2.h"
#include "backend/cpu/paged_attention_avx512.h"
#include "backend/cpu/prefill_attention.h"
#include "common/check.h"

namespace pagoda::cpu {

namespace {

// Query rows (tokens x group heads) per decode work item: enough that each K/V chunk loaded from
// the cache serves many rows, few enough that the accumulators ([32, 128] floats) stay in L1.
constexpr std::int64_t kTileRows = 32;

// One sequence, one KV head, and a range of its query rows: tokens for the decode tile, rows
// (token x group head) for the prefill tile.
struct WorkItem {
  std::int64_t seq;
  std::int64_t kv_head;
  std::int64_t first;
  std::int64_t count;
  bool prefill;
};

// The cache slot of position p of sequence s.
std::int64_t slot_of(const KvCacheView& cache, const AttentionBatch& batch, std::int64_t s,
                     std::int64_t p) {
  const std::int32_t block =
      batch.block_tables[s * batch.max_blocks_per_seq + p / cache.block_size];
  PAGODA_CHECK(block >= 0 && block < cache.num_blocks) << "block " << block;
  return block * cache.block_size + p % cache.block_size;
}

// What every work item of one paged_attention call shares.
struct Call {
  const float* q;  // [num_tokens, num_heads, head_dim]
  float* out;      // [num_tokens, num_heads, head_dim]
  const KvCacheView& cache;
  const AttentionBatch& batch;
  std::int64_t group_size;
  std::int64_t token_stride;  // num_heads * head_dim
  float scale;
  bool wide;          // The AVX-512 decode tile.
  bool wide_prefill;  // The AVX-512 prefill tile.
};

// Points a tile (either kind: the fields share their names) at one KV head of the cache and at
// the item's sequence.
template <typename Tile>
void point_at_cache(const Call& call, const WorkItem& item, Tile& tile) {
  const KvCacheView& cache = call.cache;
  const std::int64_t head_offset = item.kv_head * cache.head_dim;
  if (cache.dtype == KvDtype::kF16) {
    tile.k_f16 = cache.k_f16 + head_offset;
    tile.v_f16 = cache.v_f16 + head_offset;
  } else {
    tile.k = cache.k + head_offset;
    tile.v = cache.v + head_offset;
  }
  tile.slot_stride = cache.slot_stride();
  tile.block_table = call.batch.block_tables + item.seq * call.batch.max_blocks_per_seq;
  tile.block_size = cache.block_size;
}

// The item's rows (token x group head) of its sequence through the prefill tile.
void run_prefill_item(const Call& call, const WorkItem& item, float* scratch) {
  const AttentionBatch& batch = call.batch;
  const std::int64_t head_dim = call.cache.head_dim;
  const std::int64_t q_len = batch.query_start_loc[item.seq + 1] - batch.query_start_loc[item.seq];
  const std::int64_t offset = batch.query_start_loc[item.seq] * call.token_stride +
                              item.kv_head * call.group_size * head_dim;
  PrefillTile tile{};
  tile.q = call.q + offset;
  tile.out = call.out + offset;
  tile.token_stride = call.token_stride;
  tile.group_size = call.group_size;
  tile.head_dim = head_dim;
  tile.first_row = item.first;
  tile.num_rows = item.count;
  tile.first_position = batch.seq_lens[item.seq] - q_len;
  tile.scale = call.scale;
  point_at_cache(call, item, tile);
  tile.scratch = scratch;
  if (call.wide_prefill) {
    avx512::prefill_tile(tile);
  } else {
    avx2::prefill_tile(tile);
  }
}

// The item's tokens (with all their group heads) through the decode tile.
void run_decode_item(const Call& call, const WorkItem& item, float* scratch, float* kv_rows) {
  const AttentionBatch& batch = call.batch;
  const std::int64_t head_dim = call.cache.head_dim;
  const std::int64_t q_len = batch.query_start_loc[item.seq + 1] - batch.query_start_loc[item.seq];
  const std::int64_t token = batch.query_start_loc[item.seq] + item.first;
  const std::int64_t offset = token * call.token_stride + item.kv_head * call.group_size * head_dim;
  avx2::AttentionTile tile{};
  tile.q = call.q + offset;
  tile.out = call.out + offset;
  tile.token_stride = call.token_stride;
  tile.num_queries = item.count;
  tile.first_position = batch.seq_lens[item.seq] - q_len + item.first;
  tile.group_size = call.group_size;
  tile.head_dim = head_dim;
  tile.scale = call.scale;
  point_at_cache(call, item, tile);
  if (call.cache.dtype == KvDtype::kF16) tile.kv_rows = kv_rows;
  tile.scratch = scratch;
  if (call.wide) {
    avx512::attention_tile(tile);
  } else {
    avx2::attention_tile(tile);
  }
}

// Leading queries of a sequence that run the prefill tile; the others run the decode tile: all
// of them below kPrefillMinQueries, else those in the sequence's last KV block.
//
//   positions  0 ..................................................... seq_len-1
//              |<- earlier steps ->|<------------------ q_len ------------------>|
//                                  |<--------- prefill tile --------->|<- decode ->|
//                                                                     ^ last block's start
//
// The last block is where a later request with the same prompt starts computing when it finds
// the earlier blocks in the prefix cache: both compute those rows with the decode tile and get
// the same bits (with int16 activations a last-bit difference would show in the logprobs).
std::int64_t prefill_queries(std::int64_t q_len, std::int64_t seq_len, std::int64_t block_size) {
  if (q_len < kPrefillMinQueries) return 0;
  const std::int64_t last_block_start = (seq_len - 1) / block_size * block_size;
  return std::max<std::int64_t>(0, q_len - (seq_len - last_block_start));
}

}  // namespace

void check_attention_batch(std::int64_t num_heads, const KvCacheView& cache,
                           const AttentionBatch& batch) {
  PAGODA_CHECK(cache.num_kv_heads > 0 && num_heads % cache.num_kv_heads == 0)
      << num_heads << " q heads over " << cache.num_kv_heads << " kv heads";
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    PAGODA_CHECK(q_len >= 0 && q_len <= batch.seq_lens[s])
        << "sequence " << s << ": " << q_len << " queries, " << batch.seq_lens[s] << " tokens";
    PAGODA_CHECK_LE(batch.seq_lens[s], batch.max_blocks_per_seq * cache.block_size)
        << "sequence " << s;
  }
}

// Work items: per sequence and KV head, its first prefill_queries() queries cut into prefill tiles
// of the ISA's kPrefillRows rows (tokens x group heads), the rest into decode tiles of
// tile_queries tokens.
void paged_attention(ThreadPool& pool, const float* q, std::int64_t num_heads,
                     const KvCacheView& cache, const AttentionBatch& batch, float* out) {
  if (!cpu_has_avx2() || cache.head_dim % 8 != 0) {
    paged_attention_reference(q, num_heads, cache, batch, out);
    return;
  }
  check_attention_batch(num_heads, cache, batch);
  const std::int64_t group_size = num_heads / cache.num_kv_heads;
  const std::int64_t head_dim = cache.head_dim;
  const Call call{
      .q = q,
      .out = out,
      .cache = cache,
      .batch = batch,
      .group_size = group_size,
      .token_stride = num_heads * head_dim,
      .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim))),
      .wide = cpu_has_avx512() && head_dim % 16 == 0 && head_dim <= avx512::kMaxHeadDim,
      .wide_prefill = cpu_has_avx512() && head_dim % 16 == 0,
  };
  const bool can_prefill = head_dim <= kPrefillMaxHeadDim;
  const std::int64_t prefill_rows = call.wide_prefill ? avx512::kPrefillRows : avx2::kPrefillRows;
  const std::int64_t tile_queries = std::max<std::int64_t>(1, kTileRows / group_size);
  std::vector<WorkItem> items;
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    const std::int64_t prefill =
        can_prefill ? prefill_queries(q_len, batch.seq_lens[s], cache.block_size) : 0;
    for (std::int64_t h = 0; h < cache.num_kv_heads; ++h) {
      for (std::int64_t row = 0; row < prefill * group_size; row += prefill_rows) {
        items.push_back({s, h, row, std::min(prefill_rows, prefill * group_size - row), true});
      }
      for (std::int64_t token = prefill; token < q_len; token += tile_queries) {
        items.push_back({s, h, token, std::min(tile_queries, q_len - token), false});
      }
    }
  }
  const std::int64_t decode_floats =
      call.wide ? avx512::attention_tile_scratch_floats(tile_queries * group_size, head_dim)
                : avx2::attention_tile_scratch_floats(tile_queries * group_size, head_dim);
  const std::int64_t prefill_floats = !can_prefill ? 0
                                      : call.wide_prefill
                                          ? avx512::prefill_tile_scratch_floats(head_dim)
                                          : avx2::prefill_tile_scratch_floats(head_dim);
  const bool widen_rows = cache.dtype == KvDtype::kF16 && !call.wide;
  pool.parallel_for(
      static_cast<std::int64_t>(items.size()), [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> scratch;
        thread_local std::vector<float> kv_rows;
        if (widen_rows) kv_rows.resize(static_cast<std::size_t>(avx2::kv_rows_floats(head_dim)));
        // On a cache line: the tiles load and store their accumulators as whole vectors.
        scratch.resize(static_cast<std::size_t>(std::max(decode_floats, prefill_floats) + 16));
        auto* aligned = reinterpret_cast<float*>(
            (reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) & ~std::uintptr_t{63});
        for (std::int64_t i = begin; i < end; ++i) {
          const WorkItem& item = items[static_cast<std::size_t>(i)];
          if (item.prefill) {
            run_prefill_item(call, item, aligned);
          } else {
            run_decode_item(call, item, aligned, kv_rows.data());
          }
        }
      });
}

void avx2::reset_softmax_state(std::int64_t rows, std::int64_t head_dim, float* acc, float* row_max,
                               float* row_sum) {
  for (std::int64_t r = 0; r < rows; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  for (std::int64_t i = 0; i < rows * head_dim; ++i) acc[i] = 0.0f;
}

namespace {

// Calls row(j, slot) for keys key0 .. key0 + count - 1 in order: one division for the first key,
// then a walk along the block table (a division per key was ~15% of a decode tile's time).
template <typename Row>
void for_each_slot(const avx2::AttentionTile& tile, std::int64_t key0, std::int64_t count,
                   Row&& row) {
  std::int64_t block = key0 / tile.block_size;
  std::int64_t offset = key0 % tile.block_size;
  std::int64_t base = static_cast<std::int64_t>(tile.block_table[block]) * tile.block_size;
  for (std::int64_t j = 0; j < count; ++j) {
    row(j, base + offset);
    if (++offset == tile.block_size && j + 1 < count) {
      offset = 0;
      base = static_cast<std::int64_t>(tile.block_table[++block]) * tile.block_size;
    }
  }
}

}  // namespace

void avx2::gather_kv_rows(const AttentionTile& tile, std::int64_t key0, std::int64_t count,
                          const std::uint16_t** keys, const std::uint16_t** values) {
  for_each_slot(tile, key0, count, [&](std::int64_t j, std::int64_t slot) {
    keys[j] = tile.k_f16 + slot * tile.slot_stride;
    values[j] = tile.v_f16 + slot * tile.slot_stride;
  });
}

void avx2::gather_kv_rows(const AttentionTile& tile, std::int64_t key0, std::int64_t count,
                          const float** keys, const float** values) {
  if (tile.k_f16 != nullptr) {
    for_each_slot(tile, key0, count, [&](std::int64_t j, std::int64_t slot) {
      float* key = tile.kv_rows + j * tile.head_dim;
      float* value = tile.kv_rows + (kMaxGatherKeys + j) * tile.head_dim;
      widen_fp16(tile.k_f16 + slot * tile.slot_stride, tile.head_dim, key);
      widen_fp16(tile.v_f16 + slot * tile.slot_stride, tile.head_dim, value);
      keys[j] = key;
      values[j] = value;
    });
    return;
  }
  for_each_slot(tile, key0, count, [&](std::int64_t j, std::int64_t slot) {
    keys[j] = tile.k + slot * tile.slot_stride;
    values[j] = tile.v + slot * tile.slot_stride;
  });
}

void paged_attention_reference(const float* q, std::int64_t num_heads, const KvCacheView& cache,
                               const AttentionBatch& batch, float* out) {
  check_attention_batch(num_heads, cache, batch);
  const std::int64_t head_dim = cache.head_dim;
  const std::int64_t group_size = num_heads / cache.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<double> scores;
  std::vector<double> acc(static_cast<std::size_t>(head_dim));
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    const std::int64_t seq_len = batch.seq_lens[s];
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t token = batch.query_start_loc[s] + i;
      const std::int64_t position = seq_len - q_len + i;
      for (std::int64_t h = 0; h < num_heads; ++h) {
        const float* qh = q + (token * num_heads + h) * head_dim;
        const std::int64_t kv_head = h / group_size;
        scores.assign(static_cast<std::size_t>(position + 1), 0.0);
        double max = -INFINITY;
        for (std::int64_t p = 0; p <= position; ++p) {
          const std::int64_t slot = slot_of(cache, batch, s, p);
          double dot = 0.0;
          for (std::int64_t d = 0; d < head_dim; ++d) {
            dot += static_cast<double>(qh[d]) * kv_at(cache, /*value=*/false, slot, kv_head, d);
          }
          scores[p] = dot * scale;
          max = std::max(max, scores[p]);
        }
        double sum = 0.0;
        for (double& score : scores) {
          score = std::exp(score - max);
          sum += score;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t p = 0; p <= position; ++p) {
          const std::int64_t slot = slot_of(cache, batch, s, p);
          for (std::int64_t d = 0; d < head_dim; ++d) {
            acc[d] += scores[p] * kv_at(cache, /*value=*/true, slot, kv_head, d);
          }
        }
        float* o = out + (token * num_heads + h) * head_dim;
        for (std::int64_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[d] / sum);
      }
    }
  }
}

}  // namespace pagoda::cpu
