// Device code of paged prefill attention (see paged_attention.h). Included by one .cu per dtype.
//
// A correct, simply tiled kernel on CUDA cores: the path for f32 and the reference that the
// tensor-core kernel (paged_prefill_mma_kernel.cuh, bf16/f16) is tested against, beside the CPU
// oracle.
//
// CTA = (tile of kBlockM rows, KV head, sequence). Rows are (query token, q head of the group)
// pairs, token-major, so one K/V tile in shared memory serves the whole GQA group:
//
//   row r:  token i = r / group, head = kv_head * group + r % group
//   keys:   tiles of kBlockN positions from 0 to the last position any row of the tile may see
//
// Thread t owns row t / 4 of the tile; the 4 threads of a row split its kBlockN scores and its
// head_dim outputs (columns t % 4, t % 4 + 4, ...). Online softmax in fp32 with exp2. With a
// sliding window W, row r at position p sees keys max(0, p - W + 1) .. p: the key tiles start at
// the tile's first row's lowest key and each row masks the keys below its own.
#pragma once

#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/attention/soft_cap.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"

namespace pagoda::kernels::prefill {

constexpr int kThreads = 128;
constexpr int kBlockM = 32;  // rows per CTA: kThreads / 4
constexpr int kBlockN = 32;  // keys per tile
constexpr int kColsPerThread = kBlockN / 4;
constexpr float kLog2e = 1.4426950408889634f;

/// Shared memory of one CTA: q, k, p rows padded by one float against bank conflicts.
template <int kHeadDim>
constexpr int shared_bytes() {
  return static_cast<int>(sizeof(float)) * (kBlockM * (kHeadDim + 1) + kBlockN * (kHeadDim + 1) +
                                            kBlockN * kHeadDim + kBlockM * (kBlockN + 1));
}

// C: the cache's element type (T, or __nv_fp8_e4m3: codes read as code * scale).
template <typename T, typename C, int kHeadDim>
__global__ void __launch_bounds__(kThreads)
    paged_prefill_kernel(const T* __restrict__ q, std::int64_t q_row_stride, T* __restrict__ out,
                         const C* __restrict__ k_cache, const C* __restrict__ v_cache,
                         const std::int32_t* __restrict__ query_start_loc,
                         const std::int32_t* __restrict__ seq_lens,
                         const std::int32_t* __restrict__ block_tables,
                         std::int64_t max_blocks_per_seq, int num_heads, int num_kv_heads,
                         int block_size, float scale_log2, float softcap, float inv_softcap,
                         int sliding_window, float k_scale, float v_scale, bool skip_single_query) {
  constexpr int kQStride = kHeadDim + 1;
  constexpr int kKStride = kHeadDim + 1;
  constexpr int kPStride = kBlockN + 1;
  constexpr int kDimsPerThread = kHeadDim / 4;
  PAGODA_DYNAMIC_SHARED_AS(float, shared);
  float* q_tile = shared;                       // [kBlockM][kQStride]
  float* k_tile = q_tile + kBlockM * kQStride;  // [kBlockN][kKStride]
  float* v_tile = k_tile + kBlockN * kKStride;  // [kBlockN][kHeadDim]
  float* p_tile = v_tile + kBlockN * kHeadDim;  // [kBlockM][kPStride]

  const int seq = blockIdx.z;
  const int kv_head = blockIdx.y;
  const int group = num_heads / num_kv_heads;
  const int q_begin = query_start_loc[seq];
  const int q_len = query_start_loc[seq + 1] - q_begin;
  if (skip_single_query && q_len == 1) return;  // the decode kernel's, in a mixed step
  const int seq_len = seq_lens[seq];
  const int context = seq_len - q_len;  // cached tokens before this step's queries
  const int num_rows = q_len * group;
  const int row0 = blockIdx.x * kBlockM;
  if (row0 >= num_rows) return;

  // Load the q tile, pre-scaled; rows past the sequence are zeros (and never written out).
  for (int e = threadIdx.x; e < kBlockM * kHeadDim; e += kThreads) {
    const int r = e / kHeadDim;
    const int d = e % kHeadDim;
    const int row = row0 + r;
    float value = 0.0f;
    if (row < num_rows) {
      const int token = row / group;
      const int head = kv_head * group + row % group;
      value = to_float(q[(q_begin + token) * q_row_stride + head * kHeadDim + d]) * scale_log2;
    }
    q_tile[r * kQStride + d] = value;
  }

  const int my_row = threadIdx.x / 4;
  const int quarter = threadIdx.x % 4;
  const int row = row0 + my_row;
  const bool row_valid = row < num_rows;
  const int my_position = context + (row_valid ? row / group : 0);
  // The last position any row of this tile attends to.
  const int last_row = min(row0 + kBlockM, num_rows) - 1;
  const int key_end = min(seq_len, context + last_row / group + 1);
  // The lowest key this row, and any row of the tile (the first), attends to.
  const int my_first_key = sliding_window > 0 ? max(0, my_position - sliding_window + 1) : 0;
  const int key_begin =
      sliding_window > 0 ? max(0, context + row0 / group - sliding_window + 1) : 0;

  float m = -INFINITY;
  float l = 0.0f;
  float acc[kDimsPerThread];
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) acc[j] = 0.0f;

  const std::int32_t* table = block_tables + seq * max_blocks_per_seq;
  const std::int64_t head_offset = static_cast<std::int64_t>(kv_head) * block_size * kHeadDim;
  for (int key0 = key_begin; key0 < key_end; key0 += kBlockN) {
    __syncthreads();  // the previous tile's k/v/p are no longer read
    for (int e = threadIdx.x; e < kBlockN * kHeadDim; e += kThreads) {
      const int c = e / kHeadDim;
      const int d = e % kHeadDim;
      const int position = key0 + c;
      float kv = 0.0f;
      float vv = 0.0f;
      if (position < key_end) {
        const std::int64_t block = table[position / block_size];
        const std::int64_t index =
            (block * num_kv_heads * block_size + position % block_size) * kHeadDim + head_offset +
            d;
        kv = to_float(k_cache[index]);
        vv = to_float(v_cache[index]);
        if constexpr (!std::is_same_v<C, T>) {
          kv *= k_scale;
          vv *= v_scale;
        }
      }
      // Zeros past the end keep 0 * garbage out of the P V product.
      k_tile[c * kKStride + d] = kv;
      v_tile[c * kHeadDim + d] = vv;
    }
    __syncthreads();

    float s[kColsPerThread];
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) s[j] = 0.0f;
    for (int d = 0; d < kHeadDim; ++d) {
      const float qd = q_tile[my_row * kQStride + d];
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) {
        s[j] += qd * k_tile[(quarter + 4 * j) * kKStride + d];
      }
    }
    if (softcap != 0.0f) {  // uniform: a kernel parameter (in the scores' log2 units)
#pragma unroll
      for (int j = 0; j < kColsPerThread; ++j) s[j] = apply_soft_cap(s[j], softcap, inv_softcap);
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const int position = key0 + quarter + 4 * j;
      if (!row_valid || position > my_position || position >= key_end || position < my_first_key) {
        s[j] = -INFINITY;
      }
      tile_max = fmaxf(tile_max, s[j]);
    }
    // The 4 threads of a row are adjacent lanes.
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m, tile_max);
    // A row with nothing visible yet keeps m = -inf; use 0 so exp2 gives 0, not NaN.
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;
    const float correction = exp2f(m - m_use);
    float row_sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kColsPerThread; ++j) {
      const float p = exp2f(s[j] - m_use);
      p_tile[my_row * kPStride + quarter + 4 * j] = p;
      row_sum += p;
    }
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 1);
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, 2);
    l = l * correction + row_sum;
    m = m_new;
    __syncwarp();  // the row's p values come from the 4 lanes of the same warp

#pragma unroll
    for (int j = 0; j < kDimsPerThread; ++j) acc[j] *= correction;
    for (int c = 0; c < kBlockN; ++c) {
      const float p = p_tile[my_row * kPStride + c];
#pragma unroll
      for (int j = 0; j < kDimsPerThread; ++j) acc[j] += p * v_tile[c * kHeadDim + quarter + 4 * j];
    }
  }

  if (!row_valid) return;
  const int token = row / group;
  const int head = kv_head * group + row % group;
  T* dst = out + (static_cast<std::int64_t>(q_begin + token) * num_heads + head) * kHeadDim;
  const float inv_l = 1.0f / l;
#pragma unroll
  for (int j = 0; j < kDimsPerThread; ++j) dst[quarter + 4 * j] = from_float<T>(acc[j] * inv_l);
}

template <typename T, typename C, int kHeadDim>
Status launch_instance(const PagedAttentionParams& p, std::int64_t max_query_len,
                       cudaStream_t stream) {
  const std::int64_t group = p.num_heads / p.cache.num_kv_heads;
  const std::int64_t row_tiles = (max_query_len * group + kBlockM - 1) / kBlockM;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(p.cache.num_kv_heads),
                  static_cast<unsigned>(p.num_seqs));
  constexpr int kShared = shared_bytes<kHeadDim>();
  auto* kernel = paged_prefill_kernel<T, C, kHeadDim>;
  PAGODA_RETURN_IF_ERROR(
      (cuda::opt_in_shared_memory<paged_prefill_kernel<T, C, kHeadDim>, kShared>()));
  const SoftCap cap = soft_cap_in_units(p.logit_softcap, kLog2e);  // q is pre-scaled
  return launch_kernel(
      kernel, grid, kThreads, kShared, stream, "paged_prefill_kernel", static_cast<const T*>(p.q),
      p.q_row_stride, static_cast<T*>(p.out), static_cast<const C*>(p.cache.k),
      static_cast<const C*>(p.cache.v), p.query_start_loc, p.seq_lens, p.block_tables,
      p.max_blocks_per_seq, static_cast<int>(p.num_heads), static_cast<int>(p.cache.num_kv_heads),
      static_cast<int>(p.cache.block_size), p.softmax_scale * kLog2e, cap.cap, cap.inv_cap,
      static_cast<int>(p.sliding_window), p.cache.k_scale, p.cache.v_scale, p.skip_single_query);
}

/// The launcher's entry for one dtype T and cache element C (T, or __nv_fp8_e4m3 for 16-bit T);
/// instantiated in paged_prefill_<dtype>.cu and paged_prefill_fp8.cu.
template <typename T, typename C>
Status run_paged_prefill(const PagedAttentionParams& p, std::int64_t max_query_len,
                         cudaStream_t stream) {
  switch (p.cache.head_dim) {
    case 64: return launch_instance<T, C, 64>(p, max_query_len, stream);
    case 128: return launch_instance<T, C, 128>(p, max_query_len, stream);
    case 256: return launch_instance<T, C, 256>(p, max_query_len, stream);
    default: return unimplemented("paged prefill attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace pagoda::kernels::prefill
