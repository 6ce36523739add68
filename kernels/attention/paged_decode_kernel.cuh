// Device code of paged decode attention (see paged_attention.h). Included by one .cu per dtype
// so the instances compile in parallel.
//
// CTA = (sequence, KV head, chunk of up to kMaxGroup q heads of its group, split). The CTA's
// threads form token groups of kLanes lanes; a token group takes one token at a time, each lane
// 16 bytes of its K and V row (head_dim / kLanes elements), so a K row is one coalesced run:
//
//   bf16, head_dim 128: kLanes = 16 (16 x 16 B = 256 B per row), 8 token groups per CTA
//   token group j handles tokens start + j, start + j + 8, ...
//
// Each token group keeps its own online softmax (m, l, acc) per q head in registers; at the end
// the groups merge through shared memory once. Scores use exp2 with q pre-scaled by
// softmax_scale * log2(e).
#pragma once

#include <cmath>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_types.cuh"

namespace pagoda::kernels::decode {

constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <typename T, int kHeadDim, int kMaxGroup>
__global__ void __launch_bounds__(kThreads)
    paged_decode_kernel(const T* __restrict__ q, std::int64_t q_row_stride, T* __restrict__ out,
                        const T* __restrict__ k_cache, const T* __restrict__ v_cache,
                        const std::int32_t* __restrict__ query_start_loc,
                        const std::int32_t* __restrict__ seq_lens,
                        const std::int32_t* __restrict__ block_tables,
                        std::int64_t max_blocks_per_seq, int num_heads, int num_kv_heads,
                        int block_size, float scale_log2, int num_splits, int partition_size,
                        float* __restrict__ partial_out, float* __restrict__ partial_lse) {
  constexpr int kVec = Pack<T>::kSize;
  constexpr int kLanes = kHeadDim / kVec;
  static_assert(kLanes <= 32 && 32 % kLanes == 0, "a K row must fit in one warp");
  constexpr int kGroups = kThreads / kLanes;

  const int seq = blockIdx.x;
  const int group_size = num_heads / num_kv_heads;
  const int chunks_per_kv_head = (group_size + kMaxGroup - 1) / kMaxGroup;
  const int kv_head = blockIdx.y / chunks_per_kv_head;
  const int first_q_head = kv_head * group_size + (blockIdx.y % chunks_per_kv_head) * kMaxGroup;
  const int num_q = min(kMaxGroup, kv_head * group_size + group_size - first_q_head);
  const int split = blockIdx.z;
  const int seq_len = seq_lens[seq];
  const std::int64_t token_row = query_start_loc[seq];
  const int start = split * partition_size;
  const int end = min(seq_len, start + partition_size);

  if (start >= end) {
    // No keys in this split. A zero-length (padding) sequence still gets a defined output.
    if (seq_len == 0 && split == 0 && num_splits == 1) {
      for (int e = threadIdx.x; e < num_q * kHeadDim; e += kThreads) {
        out[(token_row * num_heads + first_q_head) * kHeadDim + e] = from_float<T>(0.0f);
      }
    }
    return;
  }

  const int lane = threadIdx.x % kLanes;
  const int token_group = threadIdx.x / kLanes;
  const int dim0 = lane * kVec;

  float q_reg[kMaxGroup][kVec];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g < num_q) {
      const Pack<T> pack =
          load_pack(q + token_row * q_row_stride + (first_q_head + g) * kHeadDim + dim0);
#pragma unroll
      for (int j = 0; j < kVec; ++j) q_reg[g][j] = to_float(pack.v[j]) * scale_log2;
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) q_reg[g][j] = 0.0f;
    }
  }

  float m[kMaxGroup];
  float l[kMaxGroup];
  float acc[kMaxGroup][kVec];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[g][j] = 0.0f;
  }

  const std::int32_t* table = block_tables + seq * max_blocks_per_seq;
  const std::int64_t head_offset = static_cast<std::int64_t>(kv_head) * block_size * kHeadDim;
  // Every thread runs the same number of iterations (the shuffles below need whole warps); a
  // token group past the end of the split idles through the last one.
  for (int base = start; base < end; base += kGroups) {
    const int t = base + token_group;
    const bool valid = t < end;
    Pack<T> k{};
    Pack<T> v{};
    if (valid) {
      const std::int64_t block = table[t / block_size];
      const std::int64_t row =
          (block * num_kv_heads * block_size + t % block_size) * kHeadDim + head_offset + dim0;
      k = load_pack(k_cache + row);
      v = load_pack(v_cache + row);
    }
    float kf[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) kf[j] = to_float(k.v[j]);
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < kVec; ++j) s += q_reg[g][j] * kf[j];
#pragma unroll
      for (int offset = kLanes / 2; offset > 0; offset >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, offset);
      }
      if (valid) {
        const float m_new = fmaxf(m[g], s);
        const float correction = exp2f(m[g] - m_new);
        const float p = exp2f(s - m_new);
        l[g] = l[g] * correction + p;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          acc[g][j] = acc[g][j] * correction + p * to_float(v.v[j]);
        }
        m[g] = m_new;
      }
    }
  }

  // Merge the token groups: each group's (m, l, acc) goes to shared memory, then every thread
  // combines one (q head, dim) column across groups.
  __shared__ float group_m[kGroups][kMaxGroup];
  __shared__ float group_l[kGroups][kMaxGroup];
  __shared__ float group_acc[kGroups][kMaxGroup][kHeadDim];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (lane == 0) {
      group_m[token_group][g] = m[g];
      group_l[token_group][g] = l[g];
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) group_acc[token_group][g][dim0 + j] = acc[g][j];
  }
  __syncthreads();

  for (int e = threadIdx.x; e < num_q * kHeadDim; e += kThreads) {
    const int g = e / kHeadDim;
    const int d = e % kHeadDim;
    float m_max = -INFINITY;
    for (int i = 0; i < kGroups; ++i) m_max = fmaxf(m_max, group_m[i][g]);
    float l_sum = 0.0f;
    float o = 0.0f;
    for (int i = 0; i < kGroups; ++i) {
      // A group that saw no token has m = -inf and weight 0.
      const float w = group_m[i][g] == -INFINITY ? 0.0f : exp2f(group_m[i][g] - m_max);
      l_sum += group_l[i][g] * w;
      o += group_acc[i][g][d] * w;
    }
    const int q_head = first_q_head + g;
    if (num_splits == 1) {
      out[(token_row * num_heads + q_head) * kHeadDim + d] = from_float<T>(o / l_sum);
    } else {
      const std::int64_t slot =
          (static_cast<std::int64_t>(seq) * num_heads + q_head) * num_splits + split;
      partial_out[slot * kHeadDim + d] = o / l_sum;
      if (d == 0) partial_lse[slot] = m_max + log2f(l_sum);
    }
  }
}

template <typename T, int kHeadDim, int kMaxGroup>
Status launch_instance(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                       const DecodeWorkspace& w, cudaStream_t stream) {
  const int group_size = static_cast<int>(p.num_heads / p.cache.num_kv_heads);
  const int chunks = (group_size + kMaxGroup - 1) / kMaxGroup;
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>(p.cache.num_kv_heads * chunks),
                  static_cast<unsigned>(plan.num_splits));
  const float scale_log2 = p.softmax_scale * kLog2e;
  paged_decode_kernel<T, kHeadDim, kMaxGroup><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(p.q), p.q_row_stride, static_cast<T*>(p.out),
      static_cast<const T*>(p.cache.k), static_cast<const T*>(p.cache.v), p.query_start_loc,
      p.seq_lens, p.block_tables, p.max_blocks_per_seq, static_cast<int>(p.num_heads),
      static_cast<int>(p.cache.num_kv_heads), static_cast<int>(p.cache.block_size), scale_log2,
      plan.num_splits, plan.partition_size, w.partial_out, w.partial_lse);
  return cuda::check_launch("paged_decode_kernel");
}

// Register arrays are sized by kMaxGroup, so the group chunk is the smallest instance that
// holds the real group: 1 (MHA), 4 (Llama-3.2-1B, 8B), 8 (Qwen2.5-7B's 7, Llama-70B's 8);
// larger groups run in chunks of 8.
template <typename T, int kHeadDim>
Status launch_for_head_dim(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                           const DecodeWorkspace& w, cudaStream_t stream) {
  const std::int64_t group_size = p.num_heads / p.cache.num_kv_heads;
  if (group_size == 1) return launch_instance<T, kHeadDim, 1>(p, plan, w, stream);
  if (group_size <= 4) return launch_instance<T, kHeadDim, 4>(p, plan, w, stream);
  return launch_instance<T, kHeadDim, 8>(p, plan, w, stream);
}

/// The launcher's entry for one dtype; instantiated in paged_decode_<dtype>.cu.
template <typename T>
Status run_paged_decode(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                        const DecodeWorkspace& w, cudaStream_t stream) {
  switch (p.cache.head_dim) {
    case 64: return launch_for_head_dim<T, 64>(p, plan, w, stream);
    case 128: return launch_for_head_dim<T, 128>(p, plan, w, stream);
    default: return unimplemented("paged decode attention: head_dim must be 64 or 128");
  }
}

}  // namespace pagoda::kernels::decode
