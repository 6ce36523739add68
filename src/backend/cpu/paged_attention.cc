#include "backend/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/paged_attention_avx2.h"
#include "backend/cpu/paged_attention_avx512.h"
#include "common/check.h"

namespace pagoda::cpu {

namespace {

// Query rows (tokens x group heads) per work item: enough that each K/V chunk loaded from the
// cache serves many rows, few enough that the accumulators ([32, 128] floats) stay in L1.
constexpr std::int64_t kTileRows = 32;

struct WorkItem {
  std::int64_t seq;
  std::int64_t kv_head;
  std::int64_t first_query;  // Index within the sequence's queries.
  std::int64_t num_queries;
};

void check_batch(std::int64_t num_heads, const KvCacheView& cache, const AttentionBatch& batch) {
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

// The cache slot of position p of sequence s.
std::int64_t slot_of(const KvCacheView& cache, const AttentionBatch& batch, std::int64_t s,
                     std::int64_t p) {
  const std::int32_t block =
      batch.block_tables[s * batch.max_blocks_per_seq + p / cache.block_size];
  PAGODA_CHECK(block >= 0 && block < cache.num_blocks) << "block " << block;
  return block * cache.block_size + p % cache.block_size;
}

}  // namespace

void paged_attention(ThreadPool& pool, const float* q, std::int64_t num_heads,
                     const KvCacheView& cache, const AttentionBatch& batch, float* out) {
  if (!cpu_has_avx2() || cache.head_dim % 8 != 0) {
    paged_attention_reference(q, num_heads, cache, batch, out);
    return;
  }
  check_batch(num_heads, cache, batch);
  const std::int64_t group_size = num_heads / cache.num_kv_heads;
  const std::int64_t tile_queries = std::max<std::int64_t>(1, kTileRows / group_size);
  std::vector<WorkItem> items;
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    for (std::int64_t h = 0; h < cache.num_kv_heads; ++h) {
      for (std::int64_t first = 0; first < q_len; first += tile_queries) {
        items.push_back({s, h, first, std::min(tile_queries, q_len - first)});
      }
    }
  }
  const std::int64_t head_dim = cache.head_dim;
  const std::int64_t token_stride = num_heads * head_dim;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const bool wide = cpu_has_avx512() && head_dim % 16 == 0 && head_dim <= avx512::kMaxHeadDim;
  const bool half = cache.dtype == KvDtype::kF16;
  pool.parallel_for(
      static_cast<std::int64_t>(items.size()), [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> scratch;
        thread_local std::vector<float> kv_rows;
        if (half && !wide) kv_rows.resize(static_cast<std::size_t>(avx2::kv_rows_floats(head_dim)));
        const std::int64_t rows = tile_queries * group_size;
        scratch.resize(
            static_cast<std::size_t>(wide ? avx512::attention_tile_scratch_floats(rows, head_dim)
                                          : avx2::attention_tile_scratch_floats(rows, head_dim)));
        for (std::int64_t i = begin; i < end; ++i) {
          const WorkItem& item = items[static_cast<std::size_t>(i)];
          const std::int64_t q_len =
              batch.query_start_loc[item.seq + 1] - batch.query_start_loc[item.seq];
          const std::int64_t token = batch.query_start_loc[item.seq] + item.first_query;
          const std::int64_t offset = token * token_stride + item.kv_head * group_size * head_dim;
          avx2::AttentionTile tile{};
          tile.q = q + offset;
          tile.out = out + offset;
          tile.token_stride = token_stride;
          tile.num_queries = item.num_queries;
          tile.first_position = batch.seq_lens[item.seq] - q_len + item.first_query;
          tile.group_size = group_size;
          tile.head_dim = head_dim;
          tile.scale = scale;
          const std::int64_t head_offset = item.kv_head * head_dim;
          if (half) {
            tile.k_f16 = cache.k_f16 + head_offset;
            tile.v_f16 = cache.v_f16 + head_offset;
            tile.kv_rows = kv_rows.data();
          } else {
            tile.k = cache.k + head_offset;
            tile.v = cache.v + head_offset;
          }
          tile.slot_stride = cache.slot_stride();
          tile.block_table = batch.block_tables + item.seq * batch.max_blocks_per_seq;
          tile.block_size = cache.block_size;
          tile.scratch = scratch.data();
          if (wide) {
            avx512::attention_tile(tile);
          } else {
            avx2::attention_tile(tile);
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
  check_batch(num_heads, cache, batch);
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
