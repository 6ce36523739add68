#include "backend/cpu/windowed_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "common/check.h"

namespace pagoda::cpu {

namespace {

double default_scale(const ScoreOptions& options, std::int64_t head_dim) {
  return options.scale != 0.0f ? options.scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

std::int64_t first_key(const ScoreOptions& options, std::int64_t position) {
  return options.sliding_window > 0
             ? std::max<std::int64_t>(0, position - options.sliding_window + 1)
             : 0;
}

// One sequence's query token and one KV head.
struct WorkItem {
  std::int64_t seq;
  std::int64_t token;  // index into the batch's tokens
  std::int64_t kv_head;
};

}  // namespace

void windowed_attention(ThreadPool& pool, const float* q, std::int64_t num_heads,
                        const KvCacheView& cache, const AttentionBatch& batch,
                        const ScoreOptions& options, float* out) {
  if (!cpu_has_avx2() || cache.head_dim % 8 != 0) {
    windowed_attention_reference(q, num_heads, cache, batch, options, out);
    return;
  }
  check_attention_batch(num_heads, cache, batch);
  const std::int64_t head_dim = cache.head_dim;
  const std::int64_t group_size = num_heads / cache.num_kv_heads;
  const auto scale = static_cast<float>(default_scale(options, head_dim));
  std::vector<WorkItem> items;
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    for (std::int64_t t = batch.query_start_loc[s]; t < batch.query_start_loc[s + 1]; ++t) {
      for (std::int64_t h = 0; h < cache.num_kv_heads; ++h) items.push_back({s, t, h});
    }
  }
  const std::int64_t scratch_floats = avx2::windowed_query_scratch_floats(group_size, head_dim);
  const bool wide = cpu_has_avx512() && head_dim % 16 == 0;
  pool.parallel_for(
      static_cast<std::int64_t>(items.size()), [&](std::int64_t begin, std::int64_t end) {
        thread_local std::vector<float> scratch;
        scratch.resize(static_cast<std::size_t>(scratch_floats));
        for (std::int64_t i = begin; i < end; ++i) {
          const WorkItem& item = items[static_cast<std::size_t>(i)];
          const std::int64_t q_len =
              batch.query_start_loc[item.seq + 1] - batch.query_start_loc[item.seq];
          const std::int64_t position =
              batch.seq_lens[item.seq] - q_len + (item.token - batch.query_start_loc[item.seq]);
          const std::int64_t row = (item.token * num_heads + item.kv_head * group_size) * head_dim;
          const std::int64_t head_offset = item.kv_head * head_dim;
          const bool f16 = cache.dtype == KvDtype::kF16;
          const avx2::WindowedQuery query{
              .q = q + row,
              .out = out + row,
              .group_size = group_size,
              .head_dim = head_dim,
              .first_key = first_key(options, position),
              .last_key = position,
              .scale = scale,
              .softcap = options.logit_softcap,
              .k = f16 ? nullptr : cache.k + head_offset,
              .v = f16 ? nullptr : cache.v + head_offset,
              .k_f16 = f16 ? cache.k_f16 + head_offset : nullptr,
              .v_f16 = f16 ? cache.v_f16 + head_offset : nullptr,
              .slot_stride = cache.slot_stride(),
              .block_table = batch.block_tables + item.seq * batch.max_blocks_per_seq,
              .block_size = cache.block_size,
              .scratch = scratch.data(),
          };
          if (wide) {
            avx512::windowed_query(query);
          } else {
            avx2::windowed_query(query);
          }
        }
      });
}

void windowed_attention_reference(const float* q, std::int64_t num_heads, const KvCacheView& cache,
                                  const AttentionBatch& batch, const ScoreOptions& options,
                                  float* out) {
  check_attention_batch(num_heads, cache, batch);
  const std::int64_t head_dim = cache.head_dim;
  const std::int64_t group_size = num_heads / cache.num_kv_heads;
  const double scale = default_scale(options, head_dim);
  const double cap = options.logit_softcap;
  std::vector<double> scores;
  std::vector<double> acc(static_cast<std::size_t>(head_dim));
  for (std::int64_t s = 0; s < batch.num_seqs; ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t token = batch.query_start_loc[s] + i;
      const std::int64_t position = batch.seq_lens[s] - q_len + i;
      const std::int64_t lo = first_key(options, position);
      for (std::int64_t h = 0; h < num_heads; ++h) {
        const float* qh = q + (token * num_heads + h) * head_dim;
        const std::int64_t kv_head = h / group_size;
        scores.assign(static_cast<std::size_t>(position + 1 - lo), 0.0);
        double max = -INFINITY;
        for (std::int64_t p = lo; p <= position; ++p) {
          const std::int32_t block =
              batch.block_tables[s * batch.max_blocks_per_seq + p / cache.block_size];
          PAGODA_CHECK(block >= 0 && block < cache.num_blocks) << "block " << block;
          const std::int64_t slot = block * cache.block_size + p % cache.block_size;
          double dot = 0.0;
          for (std::int64_t d = 0; d < head_dim; ++d) {
            dot += static_cast<double>(qh[d]) * kv_at(cache, /*value=*/false, slot, kv_head, d);
          }
          double score = dot * scale;
          if (cap != 0.0) score = cap * std::tanh(score / cap);
          scores[p - lo] = score;
          max = std::max(max, score);
        }
        double sum = 0.0;
        for (double& score : scores) {
          score = std::exp(score - max);
          sum += score;
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t p = lo; p <= position; ++p) {
          const std::int32_t block =
              batch.block_tables[s * batch.max_blocks_per_seq + p / cache.block_size];
          const std::int64_t slot = block * cache.block_size + p % cache.block_size;
          for (std::int64_t d = 0; d < head_dim; ++d) {
            acc[d] += scores[p - lo] * kv_at(cache, /*value=*/true, slot, kv_head, d);
          }
        }
        float* o = out + (token * num_heads + h) * head_dim;
        for (std::int64_t d = 0; d < head_dim; ++d) o[d] = static_cast<float>(acc[d] / sum);
      }
    }
  }
}

}  // namespace pagoda::cpu
