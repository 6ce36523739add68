// Device code of paged decode attention (see paged_attention.h). Included by one .cu per dtype
// so the instances compile in parallel.
//
// CTA = (sequence, KV head, chunk of up to kMaxGroup q heads of its group, split). The CTA's
// threads form token groups of kLanes lanes; each lane owns 16 bytes of a K and a V row
// (head_dim / kLanes elements), so a K row is one coalesced run:
//
//   bf16, head_dim 128: kLanes = 16 (16 x 16 B = 256 B per row), 8 token groups per CTA
//   one tile = kUnroll tokens per token group: token group j takes base + j + u * 8, u < kUnroll
//
// A row wider than a warp's 32 packs (f32 at head_dim 256) gives each lane kPacks packs, pack i
// at elements i * kLanes * kVec + lane * kVec, so every load of a warp stays one coalesced run.
// With a sliding window W the single query (position seq_len - 1) sees the last W keys: each
// split starts at max(its start, seq_len - W), and a split wholly before the window writes an
// empty partial (lse -inf, o 0) for the merge to weigh 0.
//
// Decode is a pure stream of K/V bytes, so the loop is built to keep loads in flight: each
// thread issues all 2 * kUnroll 16-byte loads of a tile before it uses any, and the block ids of
// the next tile are fetched during the current one (a table load followed by a dependent K load
// would otherwise cost two memory latencies per tile). Tokens past the split's end read the last
// valid row (no branch around the loads) and are masked to -inf. (Predicating those loads
// instead, with zero-filled packs, measured 0.44 B against 0.84 B on G1.)
//
// C is the cache's element type: T, or __nv_fp8_e4m3 for an FP8 cache, whose rows the same lane
// mapping reads as 8-byte packs of kVec codes (half the bytes); k_scale is folded into q and
// v_scale into the output, so the inner loop only converts codes.
//
// kStages > 0 (the pipelined variant): the K and V packs go through a ring of kStages tiles in
// shared memory by cp.async instead, kStages - 1 tiles ahead of the math, so the loads of the
// next tiles are in flight while this one is scored and no registers hold them. Each thread reads
// back only the slots it copied itself, so the ring needs per-thread cp.async waits and no
// barrier; slot (stage, pack) of thread t is 16 bytes at ((stage * kPacksPerTile + pack) *
// kThreads + t) * 16, so a warp's 32 slots are one 512-byte run (no bank conflicts). The
// register variant holds a tile's packs in registers and runs out of them for more (128 at
// 4 CTAs/SM).
//
// Each token group keeps its own online softmax (m, l, acc) per q head in registers, updated once
// per tile (one rescale per kUnroll tokens); at the end the groups merge through shared memory
// once. Scores use exp2 with q pre-scaled by softmax_scale * log2(e); a soft-cap (soft_cap.cuh)
// applies to the lane-summed scores before the mask.
#pragma once

#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/attention/paged_decode_cta.cuh"
#include "kernels/attention/soft_cap.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"

namespace pagoda::kernels::decode {

constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;

// Tokens per token group per tile, and the CTAs per SM the register budget is capped for. Group
// 4 (Llama-3) at 4 CTAs/SM fits 512 (seq, kv head) CTAs of batch 64 in one wave on 132 SMs; the
// group-8 instance holds twice the q/acc registers, so it unrolls less and runs 2 CTAs/SM.
template <int kMaxGroup>
constexpr int kUnrollFor = kMaxGroup >= 8 ? 2 : 4;
template <int kMaxGroup>
constexpr int kMinBlocksFor = kMaxGroup >= 8 ? 2 : 4;
// Tiles in the pipelined variant's ring: two in flight while the third is scored. At group 4
// that is 3 x 16 KB per CTA, 4 CTAs per SM.
constexpr int kPipelineStages = 3;

// kVec cache elements: one 16-byte (T) or 8-byte (FP8 codes for 16-bit T) access.
template <typename C, int kVec>
struct alignas(kVec * sizeof(C)) CachePack {
  static constexpr int kBytes = kVec * static_cast<int>(sizeof(C));
  static_assert(kBytes == 16 || kBytes == 8, "16- or 8-byte packs");
  C v[kVec];
};

template <typename C, int kVec>
__device__ __forceinline__ CachePack<C, kVec> load_cache_pack(const C* p) {
  CachePack<C, kVec> pack;
  if constexpr (CachePack<C, kVec>::kBytes == 16) {
    *reinterpret_cast<uint4*>(&pack) = *reinterpret_cast<const uint4*>(p);
  } else {
    *reinterpret_cast<uint2*>(&pack) = *reinterpret_cast<const uint2*>(p);
  }
  return pack;
}

template <typename C, int kVec>
__device__ __forceinline__ void cp_async_pack(std::uint32_t dst, const C* src) {
  if constexpr (CachePack<C, kVec>::kBytes == 16) {
    cp_async_16(dst, src, true);
  } else {
    cp_async_8(dst, src);
  }
}

// The shapes both variants derive from T, the cache's C and kHeadDim (see the top).
template <typename T, typename C, int kHeadDim, int kMaxGroup>
struct DecodeShape {
  static constexpr int kVec = Pack<T>::kSize;
  static constexpr int kPackBytes = CachePack<C, kVec>::kBytes;
  static constexpr int kRowPacks = kHeadDim / kVec;
  static constexpr int kLanes = kRowPacks < 32 ? kRowPacks : 32;
  static constexpr int kPacks = kRowPacks / kLanes;  // packs per lane
  static constexpr int kGroups = kThreads / kLanes;
  static constexpr int kUnroll =
      kUnrollFor<kMaxGroup> / kPacks > 0 ? kUnrollFor<kMaxGroup> / kPacks : 1;
  static constexpr int kTile = kGroups * kUnroll;
  static constexpr int kPacksPerTile = 2 * kUnroll * kPacks;  // per thread: K then V
  static constexpr int kMergeBytes = kGroups * kMaxGroup * (kHeadDim + 2) * 4;
  static constexpr int shared_bytes(int stages) {
    const int ring = stages * kPacksPerTile * kThreads * kPackBytes;
    return ring > kMergeBytes ? ring : kMergeBytes;
  }
};

template <typename T, typename C, int kHeadDim, int kMaxGroup, int kStages>
__global__ void __launch_bounds__(kThreads, kMinBlocksFor<kMaxGroup>)
    paged_decode_kernel(const T* __restrict__ q, std::int64_t q_row_stride, T* __restrict__ out,
                        const C* __restrict__ k_cache, const C* __restrict__ v_cache,
                        const std::int32_t* __restrict__ query_start_loc,
                        const std::int32_t* __restrict__ seq_lens,
                        const std::int32_t* __restrict__ block_tables,
                        std::int64_t max_blocks_per_seq, int num_heads, int num_kv_heads,
                        int block_size, float scale_log2, float out_scale, float softcap,
                        float inv_softcap, int sliding_window, int num_splits, int partition_size,
                        const std::int32_t* __restrict__ device_partition_size,
                        float* __restrict__ partial_out, float* __restrict__ partial_lse,
                        const std::int32_t* __restrict__ seq_ids) {
  if (device_partition_size != nullptr) partition_size = *device_partition_size;
  using Shape = DecodeShape<T, C, kHeadDim, kMaxGroup>;
  using KvPack = CachePack<C, Shape::kVec>;
  constexpr int kVec = Shape::kVec;
  constexpr int kLanes = Shape::kLanes;
  constexpr int kPacks = Shape::kPacks;
  constexpr int kDims = kPacks * kVec;        // elements per lane
  constexpr int kPackStride = kLanes * kVec;  // elements from one of a lane's packs to the next
  static_assert(32 % kLanes == 0 && Shape::kRowPacks % kLanes == 0,
                "a K row must tile whole warps");
  constexpr int kGroups = Shape::kGroups;
  constexpr int kUnroll = Shape::kUnroll;
  constexpr int kTile = Shape::kTile;
  PAGODA_DYNAMIC_SHARED(decode_smem);

  const DecodeCta cta = decode_cta<kMaxGroup>(seq_ids, seq_lens, query_start_loc, num_heads,
                                              num_kv_heads, sliding_window, partition_size);
  const int row = cta.row, seq = cta.seq, kv_head = cta.kv_head, first_q_head = cta.first_q_head;
  const int num_q = cta.num_q, split = cta.split, start = cta.start, end = cta.end;
  const std::int64_t token_row = cta.token_row;
  // Launched with PDL: q (the QKV projection's output) and out are touched only after this.
  pdl_wait();
  if (start >= end) {
    write_empty_split<T, kHeadDim, kThreads>(cta, out, partial_out, partial_lse, num_heads,
                                             num_splits);
    return;
  }

  const int lane = threadIdx.x % kLanes;
  const int token_group = threadIdx.x / kLanes;
  const int dim0 = lane * kVec;
  const std::int32_t* table = block_tables + seq * max_blocks_per_seq;

  // The first tile's block ids go out before the q loads so their latencies overlap.
  int blk[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    blk[u] = table[min(start + u * kGroups + token_group, end - 1) / block_size];
  }

  float q_reg[kMaxGroup][kDims];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
    for (int i = 0; i < kPacks; ++i) {
      if (g < num_q) {
        const Pack<T> pack = load_pack(q + token_row * q_row_stride +
                                       (first_q_head + g) * kHeadDim + i * kPackStride + dim0);
#pragma unroll
        for (int j = 0; j < kVec; ++j) q_reg[g][i * kVec + j] = to_float(pack.v[j]) * scale_log2;
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) q_reg[g][i * kVec + j] = 0.0f;
      }
    }
  }

  float m[kMaxGroup];
  float l[kMaxGroup];
  float acc[kMaxGroup][kDims];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int j = 0; j < kDims; ++j) acc[g][j] = 0.0f;
  }

  // Element offset of this thread's K/V row for token slot u of the tile at `base` (clamped to
  // the last valid token: no branch around the loads), with that tile's block ids.
  const auto row_of = [&](int base, int u, const int(&ids)[kUnroll]) {
    const int t = min(base + u * kGroups + token_group, end - 1);
    return ((static_cast<std::int64_t>(ids[u]) * num_kv_heads + kv_head) * block_size +
            t % block_size) *
               kHeadDim +
           dim0;
  };
  const auto fetch_ids = [&](int base, int(&ids)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      ids[u] = table[min(base + u * kGroups + token_group, end - 1) / block_size];
    }
  };
  // The pipelined variant's ring: this thread's 16-byte slot for (stage, pack).
  const std::uint32_t ring = smem_u32(decode_smem);
  const auto slot = [&](int stage, int pack) {
    return ring + static_cast<std::uint32_t>(
                      ((stage * Shape::kPacksPerTile + pack) * kThreads + threadIdx.x) *
                      Shape::kPackBytes);
  };
  const auto issue = [&](int base, int stage, const int(&ids)[kUnroll]) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t row = row_of(base, u, ids);
#pragma unroll
      for (int i = 0; i < kPacks; ++i) {
        cp_async_pack<C, kVec>(slot(stage, u * kPacks + i), k_cache + row + i * kPackStride);
        cp_async_pack<C, kVec>(slot(stage, (kUnroll + u) * kPacks + i),
                               v_cache + row + i * kPackStride);
      }
    }
  };
  const auto read_slot = [&](int stage, int pack) {
    return *reinterpret_cast<const KvPack*>(decode_smem + (slot(stage, pack) - ring));
  };
  if constexpr (kStages > 0) {
    // Prologue: the first kStages - 1 tiles in flight, then the block ids of the next one.
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (start + st * kTile < end) {
        if (st > 0) fetch_ids(start + st * kTile, blk);
        issue(start + st * kTile, st, blk);
      }
      cp_async_commit();
    }
    if (start + (kStages - 1) * kTile < end) fetch_ids(start + (kStages - 1) * kTile, blk);
  }

  // Every thread runs the same number of tiles (the shuffles below need whole warps).
  int stage = 0;
  for (int base = start; base < end; base += kTile) {
    KvPack k[kUnroll][kPacks];
    KvPack v[kUnroll][kPacks];
    if constexpr (kStages > 0) {
      // Tile base + (kStages - 1) tiles goes into the stage the previous tile left.
      const int ahead = base + (kStages - 1) * kTile;
      const int ahead_stage = stage == 0 ? kStages - 1 : stage - 1;
      if (ahead < end) issue(ahead, ahead_stage, blk);  // uniform across the CTA
      cp_async_commit();
      if (ahead + kTile < end) fetch_ids(ahead + kTile, blk);
      cp_async_wait<kStages - 1>();   // this tile's group has landed
      asm volatile("" ::: "memory");  // no shared read moves above the wait
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int i = 0; i < kPacks; ++i) k[u][i] = read_slot(stage, u * kPacks + i);
      }
    } else {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::int64_t row = row_of(base, u, blk);
#pragma unroll
        for (int i = 0; i < kPacks; ++i) {
          k[u][i] = load_cache_pack<C, kVec>(k_cache + row + i * kPackStride);
          v[u][i] = load_cache_pack<C, kVec>(v_cache + row + i * kPackStride);
        }
      }
      if (base + kTile < end) fetch_ids(base + kTile, blk);  // uniform across the CTA
    }

    float s[kMaxGroup][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float kf[kDims];
#pragma unroll
      for (int j = 0; j < kDims; ++j) kf[j] = to_float(k[u][j / kVec].v[j % kVec]);
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int j = 0; j < kDims; ++j) dot += q_reg[g][j] * kf[j];
        s[g][u] = dot;
      }
    }
    // Lane sums of all kMaxGroup x kUnroll scores: independent shuffle chains that interleave.
#pragma unroll
    for (int offset = kLanes / 2; offset > 0; offset >>= 1) {
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) s[g][u] += __shfl_xor_sync(0xffffffffu, s[g][u], offset);
      }
    }
    if (softcap != 0.0f) {  // uniform: a kernel parameter (in the scores' log2 units)
#pragma unroll
      for (int g = 0; g < kMaxGroup; ++g) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) s[g][u] = apply_soft_cap(s[g][u], softcap, inv_softcap);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (base + u * kGroups + token_group >= end) {
#pragma unroll
        for (int g = 0; g < kMaxGroup; ++g) s[g][u] = -INFINITY;
      }
    }

    if constexpr (kStages > 0) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int i = 0; i < kPacks; ++i) v[u][i] = read_slot(stage, (kUnroll + u) * kPacks + i);
      }
      stage = stage == kStages - 1 ? 0 : stage + 1;
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      float m_new = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) m_new = fmaxf(m_new, s[g][u]);
      // A token group that has seen only masked tokens keeps m = -inf; subtracting 0 then gives
      // weights exp2(-inf) = 0 instead of NaN.
      const float m_ref = m_new == -INFINITY ? 0.0f : m_new;
      const float correction = exp2f(m[g] - m_ref);
      float p[kUnroll];
      float p_sum = 0.0f;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        p[u] = exp2f(s[g][u] - m_ref);
        p_sum += p[u];
      }
      l[g] = l[g] * correction + p_sum;
#pragma unroll
      for (int j = 0; j < kDims; ++j) {
        float a = acc[g][j] * correction;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) a += p[u] * to_float(v[u][j / kVec].v[j % kVec]);
        acc[g][j] = a;
      }
      m[g] = m_new;
    }
  }

  // All loads issued: let the split merge or the next kernel (programmatic dependent launches)
  // get scheduled. They still wait for this grid's completion before reading its output.
  pdl_launch_dependents();
  // Merge the token groups: each group's (m, l, acc) goes to shared memory, then every thread
  // combines one (q head, dim) column across groups. The buffers overlay the ring, which other
  // threads may still be reading: hence the barrier first.
  auto& group_acc = *reinterpret_cast<float(*)[kGroups][kMaxGroup][kHeadDim]>(decode_smem);
  auto& group_m = *reinterpret_cast<float(*)[kGroups][kMaxGroup]>(
      decode_smem + sizeof(float) * kGroups * kMaxGroup * kHeadDim);
  auto& group_l = *reinterpret_cast<float(*)[kGroups][kMaxGroup]>(
      decode_smem + sizeof(float) * kGroups * kMaxGroup * (kHeadDim + 1));
  if constexpr (kStages > 0) cp_async_wait<0>();  // the committed empty groups
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (lane == 0) {
      group_m[token_group][g] = m[g];
      group_l[token_group][g] = l[g];
    }
#pragma unroll
    for (int j = 0; j < kDims; ++j) {
      group_acc[token_group][g][(j / kVec) * kPackStride + dim0 + j % kVec] = acc[g][j];
    }
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
      out[(token_row * num_heads + q_head) * kHeadDim + d] = from_float<T>(o / l_sum * out_scale);
    } else {
      const std::int64_t slot =
          (static_cast<std::int64_t>(row) * num_heads + q_head) * num_splits + split;
      partial_out[slot * kHeadDim + d] = o / l_sum * out_scale;
      if (d == 0) partial_lse[slot] = m_max + log2f(l_sum);
    }
  }
}

template <typename T, typename C, int kHeadDim, int kMaxGroup, int kStages>
Status launch_instance(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                       const DecodeWorkspace& w, cudaStream_t stream) {
  constexpr int kSharedBytes = DecodeShape<T, C, kHeadDim, kMaxGroup>::shared_bytes(kStages);
  static_assert(kSharedBytes <= 48 * 1024, "over the default dynamic shared memory limit");
  const int group_size = static_cast<int>(p.num_heads / p.cache.num_kv_heads);
  const int chunks = (group_size + kMaxGroup - 1) / kMaxGroup;
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>(p.cache.num_kv_heads * chunks),
                  static_cast<unsigned>(plan.num_splits));
  // FP8: k_scale rides on q's scale and v_scale on the output (both exactly 1 for a cache of T).
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  const float scale_log2 = p.softmax_scale * kLog2e * (kFp8 ? p.cache.k_scale : 1.0f);
  const float out_scale = kFp8 ? p.cache.v_scale : 1.0f;
  // The scores are q.k * softmax_scale * log2(e) (the k_scale makes FP8 codes true keys).
  const SoftCap cap = soft_cap_in_units(p.logit_softcap, kLog2e);
  return launch_pdl(paged_decode_kernel<T, C, kHeadDim, kMaxGroup, kStages>, grid, dim3(kThreads),
                    kSharedBytes, stream, "paged_decode_kernel", static_cast<const T*>(p.q),
                    p.q_row_stride, static_cast<T*>(p.out), static_cast<const C*>(p.cache.k),
                    static_cast<const C*>(p.cache.v), p.query_start_loc, p.seq_lens, p.block_tables,
                    p.max_blocks_per_seq, static_cast<int>(p.num_heads),
                    static_cast<int>(p.cache.num_kv_heads), static_cast<int>(p.cache.block_size),
                    scale_log2, out_scale, cap.cap, cap.inv_cap, static_cast<int>(p.sliding_window),
                    plan.num_splits, plan.partition_size, plan.device_partition_size, w.partial_out,
                    w.partial_lse, p.decode_seq_ids);
}

// Register arrays are sized by kMaxGroup, so the group chunk is the smallest instance that
// holds the real group: 1 (MHA), 4 (Llama-3.2-1B, 8B), 8 (Qwen2.5-7B's 7, Llama-70B's 8);
// larger groups run in chunks of 8.
template <typename T, typename C, int kHeadDim, int kStages>
Status launch_for_group(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                        const DecodeWorkspace& w, cudaStream_t stream) {
  const std::int64_t group_size = p.num_heads / p.cache.num_kv_heads;
  if (group_size == 1) return launch_instance<T, C, kHeadDim, 1, kStages>(p, plan, w, stream);
  if (group_size <= 4) return launch_instance<T, C, kHeadDim, 4, kStages>(p, plan, w, stream);
  return launch_instance<T, C, kHeadDim, 8, kStages>(p, plan, w, stream);
}

template <typename T, typename C, int kHeadDim>
Status launch_for_head_dim(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                           const DecodeWorkspace& w, bool pipelined, cudaStream_t stream) {
  return pipelined ? launch_for_group<T, C, kHeadDim, kPipelineStages>(p, plan, w, stream)
                   : launch_for_group<T, C, kHeadDim, 0>(p, plan, w, stream);
}

/// The launcher's entry for one dtype T and cache element C (T, or __nv_fp8_e4m3 for 16-bit T);
/// instantiated in paged_decode_<dtype>.cu and paged_decode_fp8.cu. `pipelined`: the cp.async
/// ring variant, else K/V in registers.
template <typename T, typename C>
Status run_paged_decode(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                        const DecodeWorkspace& w, bool pipelined, cudaStream_t stream) {
  switch (p.cache.head_dim) {
    case 64: return launch_for_head_dim<T, C, 64>(p, plan, w, pipelined, stream);
    case 128: return launch_for_head_dim<T, C, 128>(p, plan, w, pipelined, stream);
    case 256: return launch_for_head_dim<T, C, 256>(p, plan, w, pipelined, stream);
    default: return unimplemented("paged decode attention: head_dim must be 64, 128 or 256");
  }
}

}  // namespace pagoda::kernels::decode
