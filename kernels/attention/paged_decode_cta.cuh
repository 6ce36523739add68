// What every paged decode kernel (paged_decode_kernel.cuh, paged_decode_mma_kernel.cuh) derives
// from its CTA's place before it reads a key: the sequence, KV head, q-head chunk and split it
// owns and the keys [start, end) of that split, and what it writes when the split holds none.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common/device_types.cuh"

namespace pagoda::kernels::decode {

/// grid = (sequences, KV heads x chunks of up to kMaxGroup q heads, splits).
struct DecodeCta {
  int row;  ///< blockIdx.x: the CTA's place in the grid and in the split partials
  int seq;  ///< its sequence in the batch (seq_ids[row] for a mixed step's decode subset)
  int kv_head;
  int first_q_head;
  int num_q;  ///< q heads of the chunk (<= kMaxGroup)
  int split;
  int seq_len;
  int split_start;  ///< the split's first position, window or not
  int start;        ///< first key: the split's, or the sliding window's when later
  int end;          ///< one past the last key
  std::int64_t token_row;
};

/// Reads only step metadata (seq_ids, seq_lens, query_start_loc), so it may run before pdl_wait.
template <int kMaxGroup>
__device__ __forceinline__ DecodeCta decode_cta(const std::int32_t* __restrict__ seq_ids,
                                                const std::int32_t* __restrict__ seq_lens,
                                                const std::int32_t* __restrict__ query_start_loc,
                                                int num_heads, int num_kv_heads, int sliding_window,
                                                int partition_size) {
  DecodeCta c;
  c.row = blockIdx.x;
  c.seq = seq_ids != nullptr ? seq_ids[c.row] : c.row;
  const int group_size = num_heads / num_kv_heads;
  const int chunks_per_kv_head = (group_size + kMaxGroup - 1) / kMaxGroup;
  c.kv_head = blockIdx.y / chunks_per_kv_head;
  c.first_q_head = c.kv_head * group_size + (blockIdx.y % chunks_per_kv_head) * kMaxGroup;
  c.num_q = min(kMaxGroup, c.kv_head * group_size + group_size - c.first_q_head);
  c.split = blockIdx.z;
  c.seq_len = seq_lens[c.seq];
  c.token_row = query_start_loc[c.seq];
  c.split_start = c.split * partition_size;
  const int window_start = sliding_window > 0 ? max(0, c.seq_len - sliding_window) : 0;
  c.start = max(c.split_start, window_start);
  c.end = min(c.seq_len, c.split_start + partition_size);
  return c;
}

/// A split with no key (start >= end): a zero-length (padding) sequence still gets a defined
/// output (0), and a split the merge reads (it starts before seq_len) but a window left empty
/// gets an empty partial (o 0, lse -inf) that the merge weighs 0.
template <typename T, int kHeadDim, int kThreads>
__device__ __forceinline__ void write_empty_split(const DecodeCta& c, T* __restrict__ out,
                                                  float* __restrict__ partial_out,
                                                  float* __restrict__ partial_lse, int num_heads,
                                                  int num_splits) {
  if (c.seq_len == 0 && c.split == 0 && num_splits == 1) {
    for (int e = threadIdx.x; e < c.num_q * kHeadDim; e += kThreads) {
      out[(c.token_row * num_heads + c.first_q_head) * kHeadDim + e] = from_float<T>(0.0f);
    }
  }
  if (num_splits > 1 && c.split_start < c.seq_len) {
    for (int e = threadIdx.x; e < c.num_q * kHeadDim; e += kThreads) {
      const std::int64_t slot =
          (static_cast<std::int64_t>(c.row) * num_heads + c.first_q_head + e / kHeadDim) *
              num_splits +
          c.split;
      partial_out[slot * kHeadDim + e % kHeadDim] = 0.0f;
      if (e % kHeadDim == 0) partial_lse[slot] = -INFINITY;
    }
  }
}

}  // namespace pagoda::kernels::decode
