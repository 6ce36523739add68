// Tensor-core paged prefill attention (FlashAttention-2 style) for bf16 and f16; see
// paged_attention.h for the contract. Included by paged_prefill_mma_<dtype>.cu. The CUDA-core
// kernel in paged_prefill_kernel.cuh stays the simple reference it is tested against.
//
// CTA = (q head, tile of kBlockM queries of one sequence). 4 warps; warp w owns kMTiles slices of
// 16 whole query rows ("split-Q": the softmax of a row never leaves its warp). Per tile of
// kBlockN keys (64; at d128 with two m-tiles 32 or 64, the latter FA2's 128 x 64):
//
//   K, V tile  <- cp.async gather from the paged cache (block table per key), double buffered
//   S = Q K^T     mma.sync m16n8k16, fp32 accumulators (Q fragments via ldmatrix, K via ldmatrix)
//   P = exp2(S * scale_log2 - m), online softmax per row in registers (4 lanes share a row)
//   O += P V      P re-packed to bf16/f16 from the S accumulators, V via ldmatrix.trans
//
// Only key tiles that reach past the CTA's first query position get the causal mask. Keys past
// the sequence are zero-filled (cp.async src-size 0), so 0 * garbage never enters P V.
//
// An FP8 cache (C = __nv_fp8_e4m3): the tile's codes are copied (cp.async, double buffered) into
// a staging area, and once they land every thread turns its 16-code chunks into T (code x scale,
// rounded once; exact for scale 1, e4m3 values being bf16/f16 values) in the swizzled K and V
// tiles, which then have a single stage; the rest is as below. Same shared memory as a 16-bit
// cache: N x d x (2 + 2 + 4 x 1) bytes against 4 x N x d x 2.
//
// Shared memory rows are head_dim elements (8 or 16 chunks of 16 bytes); chunk c of row r is
// stored at chunk c ^ (r & 7), so the 8 row addresses of one ldmatrix phase hit 8 distinct
// 16-byte bank groups (unswizzled, all 8 rows start in the same bank: 8-way conflicts).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/attention/soft_cap.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/common/mma.cuh"

namespace pagoda::kernels::prefill_mma {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

template <int kHeadDim, int kMTiles, int kBlockN>
struct Tile {
  static constexpr int kBlockM = kWarps * 16 * kMTiles;  // queries per CTA
  static constexpr int kChunks = kHeadDim / 8;           // 16-byte chunks per row
  // With one m-tile Q lives in registers, so its staging area is stage 1 of K (same size: 64
  // rows); with two, or at head_dim 256 (its O accumulators take 128 registers), it is re-read
  // every tile and keeps its own area.
  static constexpr bool kQInRegisters = kMTiles == 1 && kHeadDim <= 128;
  static constexpr int kSharedBytes =
      ((kQInRegisters ? 0 : kBlockM) + 4 * kBlockN) * kHeadDim * 2;  // (Q), 2 x (K, V)
  // 3 CTAs (12 warps) per SM when Q is in registers: 64 KB of shared memory each at d128, and
  // the register cap of 168 that __launch_bounds__(128, 3) implies. The first H100 run at 2 CTAs
  // (252 registers) was latency-bound: 0.56 eligible warps per scheduler, tensor pipe 34% busy.
  static constexpr int kMinBlocks = kQInRegisters ? 3 : 2;
  static constexpr int kChunksPerRow = kHeadDim / 8;
  // The logit soft-cap is compiled into every tile but 128 x 64 at d128: that one sits at the
  // 255-register cap of 2 CTAs per SM, and the tanh's temporaries raise its spills from 12 to 68
  // bytes (84 with an FP8 cache) even when the cap is 0 (CUDA 13's ptxas). kAuto gives a
  // soft-capped 512+ prompt 128 x 32 instead.
  static constexpr bool kSoftCap = !(kHeadDim == 128 && kMTiles == 2 && kBlockN == 64);
};

/// 16 FP8 codes at shared byte `from` -> 16 T (code x scale) at the swizzled chunks `to0`, `to1`.
template <typename T>
__device__ __forceinline__ void fp8_chunk_to_tile(unsigned char* smem, std::uint32_t from,
                                                  std::uint32_t to0, std::uint32_t to1,
                                                  float scale) {
  const uint4 raw = *reinterpret_cast<const uint4*>(smem + from);
  const auto* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
  std::uint32_t out[8];
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pairs[m], __NV_E4M3)));
    out[m] = pack2<T>(f.x * scale, f.y * scale);
  }
  *reinterpret_cast<uint4*>(smem + to0) = make_uint4(out[0], out[1], out[2], out[3]);
  *reinterpret_cast<uint4*>(smem + to1) = make_uint4(out[4], out[5], out[6], out[7]);
}

template <typename T, typename C, int kHeadDim, int kMTiles, int kBlockN>
__global__ void __launch_bounds__(kThreads, (Tile<kHeadDim, kMTiles, kBlockN>::kMinBlocks))
    paged_prefill_mma_kernel(const T* __restrict__ q, std::int64_t q_row_stride,
                             T* __restrict__ out, const C* __restrict__ k_cache,
                             const C* __restrict__ v_cache,
                             const std::int32_t* __restrict__ query_start_loc,
                             const std::int32_t* __restrict__ seq_lens,
                             const std::int32_t* __restrict__ block_tables,
                             std::int64_t max_blocks_per_seq, int num_heads, int num_kv_heads,
                             int block_size, int block_shift, float scale_log2, float softcap,
                             float inv_softcap, int num_q_tiles, float k_scale, float v_scale,
                             bool skip_single_query, int sliding_window) {
  using Shape = Tile<kHeadDim, kMTiles, kBlockN>;
  constexpr int kBlockM = Shape::kBlockM;
  constexpr int kChunks = Shape::kChunks;
  constexpr int kKSteps = kHeadDim / 16;  // k-steps of Q K^T
  constexpr int kNTiles = kBlockN / 8;    // 8-key column tiles of S
  constexpr int kDTiles = kHeadDim / 8;   // 8-dim column tiles of O
  constexpr int kPSteps = kBlockN / 16;   // k-steps of P V
  // Q fragments in registers cost 2 * kHeadDim / 8 registers per m-tile; with two m-tiles the
  // O and S accumulators already take 192 at d128, so they are re-read from shared memory then.
  constexpr bool kQInRegisters = Shape::kQInRegisters;
  static_assert(!kQInRegisters || kBlockM == kBlockN, "Q is staged in one K tile");
  constexpr std::uint32_t kKvTileBytes = kBlockN * kHeadDim * 2;
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  constexpr std::uint32_t kCodeTileBytes = kBlockN * kHeadDim;  // an FP8 K (V) tile's codes

  PAGODA_DYNAMIC_SHARED_ALIGNED(shared, 128);
  const std::uint32_t base = smem_u32(shared);
  // 16-bit cache: [Q] [K stage 0, 1] [V stage 0, 1]; with Q in registers, Q is staged in K
  // stage 1. FP8: [Q] [K] [V] [codes stage 0: K, V] [codes stage 1: K, V]; with Q in registers,
  // Q is staged in codes stage 1 (kBlockM x d x 2 = 2 x kCodeTileBytes).
  const std::uint32_t k_smem = kQInRegisters ? base : base + kBlockM * kHeadDim * 2;
  const std::uint32_t v_smem = k_smem + (kFp8 ? 1 : 2) * kKvTileBytes;
  const std::uint32_t codes = k_smem + 2 * kKvTileBytes;  // FP8 only
  const std::uint32_t q_smem = !kQInRegisters ? base
                               : kFp8         ? codes + 2 * kCodeTileBytes
                                              : k_smem + kKvTileBytes;

  const int head = blockIdx.x;
  // Later query tiles see more keys: launch them first so the short ones fill the tail.
  const int tile = num_q_tiles - 1 - static_cast<int>(blockIdx.y);
  const int seq = blockIdx.z;
  const int q_begin = query_start_loc[seq];
  const int q_len = query_start_loc[seq + 1] - q_begin;
  const int q0 = tile * kBlockM;
  if (q0 >= q_len || (skip_single_query && q_len == 1)) return;  // the latter: the decode kernel's
  const int seq_len = seq_lens[seq];
  const int context = seq_len - q_len;  // cached tokens before this step's queries
  const int kv_head = head / (num_heads / num_kv_heads);
  // Keys any query of the tile sees: positions 0 .. context + last query, or with a sliding
  // window W from the first query's first visible key (context + q0 - W + 1) on.
  const int key_end = min(seq_len, context + q0 + kBlockM);
  const int num_key_tiles = (key_end + kBlockN - 1) / kBlockN;
  // Windows are compiled into the head_dim 256 instances only (Gemma 3's): the d64/d128 ones keep
  // their registers for the common case, and the launcher refuses them a window.
  constexpr bool kWindowed = kHeadDim == 256;
  if constexpr (!kWindowed) sliding_window = 0;
  // The first key any query of the tile sees; the tiles start at or before it.
  const int key_begin = sliding_window > 0 ? max(0, context + q0 - sliding_window + 1) : 0;
  const int first_key_tile = key_begin / kBlockN;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  // Q tile (rows past the sequence zero-filled; they are computed but never stored).
  for (int e = tid; e < kBlockM * kChunks; e += kThreads) {
    const int r = e / kChunks;
    const int c = e % kChunks;
    const bool valid = q0 + r < q_len;
    const T* src = valid ? q + static_cast<std::int64_t>(q_begin + q0 + r) * q_row_stride +
                               head * kHeadDim + c * 8
                         : q;
    cp_async_16(q_smem + swizzled<kHeadDim>(r, c), src, valid);
  }
  cp_async_commit();

  const std::int32_t* table = block_tables + seq * max_blocks_per_seq;
  const std::int64_t block_stride = static_cast<std::int64_t>(num_kv_heads) * block_size * kHeadDim;
  // Thread t copies chunk t % kCacheChunks of rows t / kCacheChunks + i * kRowsPerPass: the
  // chunk and the swizzle (row & 7) stay fixed across i, so only the row's page lookup varies.
  // FP8 codes land unswizzled in their staging area (only the conversion reads them).
  constexpr int kCacheChunks = kHeadDim * static_cast<int>(sizeof(C)) / 16;
  constexpr int kRowsPerPass = kThreads / kCacheChunks;
  // Rows a pass apart share their swizzle (row & 7) when a pass spans 8 or more rows (d <= 128);
  // at d256 each pass's rows are swizzled on their own.
  constexpr bool kFixedSwizzle = kFp8 || kRowsPerPass % 8 == 0;
  static_assert(kBlockN % kRowsPerPass == 0);
  const int ld_row = tid / kCacheChunks;
  const int ld_chunk = tid % kCacheChunks;
  const std::uint32_t ld_dst =
      kFp8 ? ld_row * kHeadDim + ld_chunk * 16 : swizzled<kHeadDim>(ld_row, ld_chunk);
  constexpr std::uint32_t kRowStride = kHeadDim * static_cast<int>(sizeof(C));
  const std::int64_t ld_col = static_cast<std::int64_t>(kv_head) * block_size * kHeadDim +
                              ld_chunk * (16 / static_cast<int>(sizeof(C)));
  const C* k_src = k_cache + ld_col;
  const C* v_src = v_cache + ld_col;
  // The page of every row first, then all table loads, then the copies: a row at a time (as
  // the division branch made the compiler emit it) put one dependent table load per row, eight
  // in series, in front of each tile's copies. Power-of-two pages (the usual 16 or 64) take the
  // shift; the choice is uniform, made once per tile outside the unrolled rows.
  constexpr int kRowsPerThread = kBlockN / kRowsPerPass;
  auto load_rows = [&](auto pow2_pages, int key_tile, int stage) {
    int position[kRowsPerThread];
    int page[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      position[i] = key_tile * kBlockN + ld_row + i * kRowsPerPass;
      if constexpr (decltype(pow2_pages)::value) {
        page[i] = position[i] >> block_shift;
      } else {
        page[i] = position[i] / block_size;
      }
    }
    std::int32_t entry[kRowsPerThread];
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      // Rows past key_end, or before a window's first key (a sliding group's table holds no
      // page, -1, there), read the table's first entry and copy nothing: zeros, masked anyway.
      const bool in_window = !kWindowed || position[i] >= key_begin;
      entry[i] = table[position[i] < key_end && in_window ? page[i] : 0];
    }
#pragma unroll
    for (int i = 0; i < kRowsPerThread; ++i) {
      const bool valid = position[i] < key_end && (!kWindowed || position[i] >= key_begin);
      const int in_page = position[i] - page[i] * block_size;
      const std::int64_t offset = valid ? entry[i] * block_stride + in_page * kHeadDim : 0;
      const std::uint32_t row_dst = kFixedSwizzle
                                        ? ld_dst + i * kRowsPerPass * kRowStride
                                        : swizzled<kHeadDim>(ld_row + i * kRowsPerPass, ld_chunk);
      if constexpr (kFp8) {
        const std::uint32_t k_dst = codes + stage * 2 * kCodeTileBytes + row_dst;
        cp_async_16(k_dst, k_src + offset, valid);
        cp_async_16(k_dst + kCodeTileBytes, v_src + offset, valid);
      } else {
        const std::uint32_t dst = stage * kKvTileBytes + row_dst;
        cp_async_16(k_smem + dst, k_src + offset, valid);
        cp_async_16(v_smem + dst, v_src + offset, valid);
      }
    }
  };
  auto load_kv = [&](int key_tile, int stage) {
    if (block_shift >= 0) {
      load_rows(std::true_type{}, key_tile, stage);
    } else {
      load_rows(std::false_type{}, key_tile, stage);
    }
  };
  load_kv(first_key_tile, 0);
  cp_async_commit();

  // This warp's first row in the tile, and the lane's rows within each 16-row slice.
  const int warp_row0 = warp * 16 * kMTiles;
  std::uint32_t q_frag[kQInRegisters ? kKSteps : 1][4];
  // ldmatrix.x4 of a 16x16 A fragment: lanes 0-15 address rows 0-15 of chunk 2k, 16-31 chunk 2k+1.
  const int a_row = (lane % 8) + ((lane / 8) % 2) * 8;
  const int a_chunk = lane / 16;
  if constexpr (kQInRegisters) {
    cp_async_wait<1>();  // the Q group
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      ldmatrix_x4(q_frag[kk], q_smem + swizzled<kHeadDim>(warp_row0 + a_row, kk * 2 + a_chunk));
    }
    __syncthreads();  // every warp has its Q before tile 1 overwrites the staging area
  }

  float o[kMTiles][kDTiles][4];
  float m[kMTiles][2];  // running max of the raw scores of the lane's two rows
  float l[kMTiles][2];  // this lane's share of the row sums (reduced over the quad at the end)
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][dt][i] = 0.0f;
    }
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  // B fragments of K (non-transposed ldmatrix.x4 covers two 8-key tiles x 16 dims) and of V
  // (transposed, 16 keys x two 8-dim tiles).
  const int k_row = (lane % 8) + (lane / 16) * 8;
  const int k_chunk = (lane / 8) % 2;
  const int v_row = (lane % 8) + ((lane / 8) % 2) * 8;
  const int v_chunk = lane / 16;
  // In-loop fragment addresses: with chunk = c0 + 2k (c0 in {0, 1}) and the row's low 3 bits
  // fixed per lane, swizzled(row, c0 + 2k) == swizzled(row, c0) ^ (k << 5): one XOR with an
  // immediate per ldmatrix. Left to itself the compiler hoisted one full address per k-step out
  // of the tile loop (16+ registers at d128) and spilled them at the 168-register cap.
  // Row steps of 16 (np, kp, mt) only add multiples of 16 rows, above the swizzled bits.
  constexpr std::uint32_t kRowBytes = kHeadDim * 2;
  const std::uint32_t k_lane = swizzled<kHeadDim>(k_row, k_chunk);
  const std::uint32_t v_lane = swizzled<kHeadDim>(v_row, v_chunk);
  std::uint32_t q_lane = swizzled<kHeadDim>(warp_row0 + a_row, a_chunk);

  for (int j = first_key_tile; j < num_key_tiles; ++j) {
    const int stage = (j - first_key_tile) & 1;
    if (j + 1 < num_key_tiles) {
      load_kv(j + 1, stage ^ 1);
      cp_async_commit();
      cp_async_wait<1>();  // tile j (and Q) landed; tile j + 1 stays in flight
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (kFp8) {
      // This tile's codes to T in the (single-stage) K and V tiles; the previous tile's reads
      // of them ended at the loop's last barrier.
      const std::uint32_t k_codes = codes + stage * 2 * kCodeTileBytes - base;
      for (int e = tid; e < kBlockN * kCacheChunks; e += kThreads) {
        const int r = e / kCacheChunks;
        const int c = e % kCacheChunks;
        const std::uint32_t from = k_codes + r * kHeadDim + c * 16;
        const std::uint32_t to0 = swizzled<kHeadDim>(r, 2 * c);
        const std::uint32_t to1 = swizzled<kHeadDim>(r, 2 * c + 1);
        fp8_chunk_to_tile<T>(shared, from, k_smem - base + to0, k_smem - base + to1, k_scale);
        fp8_chunk_to_tile<T>(shared, from + kCodeTileBytes, v_smem - base + to0,
                             v_smem - base + to1, v_scale);
      }
      __syncthreads();
    }
    // Offsets within the K (V) area, stage included: the stage's 16 KB step sits above the
    // XORed bits, and a loop-variant base keeps the per-k addresses inside the loop.
    const std::uint32_t stage_offset = kFp8 ? 0 : stage * kKvTileBytes;
    const std::uint32_t k_stage_lane = stage_offset + k_lane;
    const std::uint32_t v_stage_lane = stage_offset + v_lane;
    if constexpr (!kQInRegisters) asm volatile("" : "+r"(q_lane));  // same, for Q

    // Causal: a key tile that starts past the last query position of this warp is masked whole
    // for its rows (max unchanged, correction 1, P = 0), so the warp skips it and keeps the same
    // bits; only the tiles on the CTA's diagonal can be. The branch is uniform over the warp.
    // A sliding window likewise leaves out a tile wholly before the window of the warp's first row
    // (and so of all its rows).
    const int k0 = j * kBlockN;
    const int warp_first = context + q0 + warp_row0;
    if (k0 <= warp_first + 16 * kMTiles - 1 &&
        (!kWindowed || sliding_window == 0 || k0 + kBlockN - 1 > warp_first - sliding_window)) {
      float s[kMTiles][kNTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
          for (int i = 0; i < 4; ++i) s[mt][nt][i] = 0.0f;
        }
      }
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        std::uint32_t a[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[mt][i] = q_frag[kk][i];
          } else {
            ldmatrix_x4(a[mt], q_smem + (q_lane ^ (kk << 5)) + mt * 16 * kRowBytes);
          }
        }
#pragma unroll
        for (int np = 0; np < kNTiles / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4(b, k_smem + (k_stage_lane ^ (kk << 5)) + np * 16 * kRowBytes);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_16816<T>(s[mt][2 * np], a[mt], b[0], b[1]);
            mma_16816<T>(s[mt][2 * np + 1], a[mt], b[2], b[3]);
          }
        }
      }

      // Soft-cap in the raw q.k units of s (uniform: a kernel parameter), before the masks.
      if (Shape::kSoftCap && softcap != 0.0f) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              s[mt][nt][i] = apply_soft_cap(s[mt][nt][i], softcap, inv_softcap);
            }
          }
        }
      }

      // Causal mask, only where some key of the tile lies past the tile's first query position;
      // a window's, where some key lies before the last query's window (key <= position - W).
      // Query row r sits at position context + q0 + r; rows past q_len see zero-filled keys only
      // beyond key_end, which keeps their (discarded) results finite.
      const bool window_mask =
          kWindowed && sliding_window > 0 && k0 <= context + q0 + kBlockM - 1 - sliding_window;
      if (k0 + kBlockN - 1 > context + q0 || window_mask) {
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int position = context + q0 + warp_row0 + mt * 16 + lane / 4 + h * 8;
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt) {
              const int key = k0 + nt * 8 + (lane % 4) * 2;
              if constexpr (kWindowed) {
                const int lowest = window_mask ? position - sliding_window + 1 : 0;
                if (key > position || key < lowest) s[mt][nt][2 * h] = -INFINITY;
                if (key + 1 > position || key + 1 < lowest) s[mt][nt][2 * h + 1] = -INFINITY;
              } else {
                if (key > position) s[mt][nt][2 * h] = -INFINITY;
                if (key + 1 > position) s[mt][nt][2 * h + 1] = -INFINITY;
              }
            }
          }
        }
      }

      // Online softmax. Without a window key 0 is visible to every row and tile 0 comes first, so
      // m is finite from the first tile on and exp2(-inf) = 0 handles both the first correction
      // and masks. With one a row can see no key of its first tiles: its max stays -inf and 0
      // stands in for it (a finite max is used as is, so no bit changes).
      std::uint32_t p[kMTiles][kPSteps][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        float correction_of[2];  // of the lane's two rows
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float tile_max = m[mt][h];
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
            tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
          }
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
          const float max_ref = kWindowed && tile_max == -INFINITY ? 0.0f : tile_max;
          const float correction = fast_exp2((m[mt][h] - max_ref) * scale_log2);
          m[mt][h] = tile_max;
          const float max_scaled = max_ref * scale_log2;
          float sum = 0.0f;
#pragma unroll
          for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const float e = fast_exp2(fmaf(s[mt][nt][2 * h + i], scale_log2, -max_scaled));
              s[mt][nt][2 * h + i] = e;
              sum += e;
            }
          }
          l[mt][h] = l[mt][h] * correction + sum;
          correction_of[h] = correction;
        }
        // Rescale O only where the running max of some row of the slice grew. Past the first few
        // tiles a row's max rarely grows, and this multiply (kHeadDim / 2 FMULs a lane per slice,
        // per tile) is the largest ALU cost of the loop after the exponentials. A correction of
        // exactly 1 (max unchanged) is the identity, so skipping it changes no bit; the branch is
        // uniform over the warp.
        if (__any_sync(0xffffffffu, correction_of[0] != 1.0f || correction_of[1] != 1.0f)) {
#pragma unroll
          for (int dt = 0; dt < kDTiles; ++dt) {
            o[mt][dt][0] *= correction_of[0];
            o[mt][dt][1] *= correction_of[0];
            o[mt][dt][2] *= correction_of[1];
            o[mt][dt][3] *= correction_of[1];
          }
        }
        // The S accumulators of key tiles 2k and 2k+1 are exactly the A fragment of P V step k.
#pragma unroll
        for (int kp = 0; kp < kPSteps; ++kp) {
          p[mt][kp][0] = pack2<T>(s[mt][2 * kp][0], s[mt][2 * kp][1]);
          p[mt][kp][1] = pack2<T>(s[mt][2 * kp][2], s[mt][2 * kp][3]);
          p[mt][kp][2] = pack2<T>(s[mt][2 * kp + 1][0], s[mt][2 * kp + 1][1]);
          p[mt][kp][3] = pack2<T>(s[mt][2 * kp + 1][2], s[mt][2 * kp + 1][3]);
        }
      }

#pragma unroll
      for (int kp = 0; kp < kPSteps; ++kp) {
#pragma unroll
        for (int dp = 0; dp < kDTiles / 2; ++dp) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, v_smem + (v_stage_lane ^ (dp << 5)) + kp * 16 * kRowBytes);
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) {
            mma_16816<T>(o[mt][2 * dp], p[mt][kp], b[0], b[1]);
            mma_16816<T>(o[mt][2 * dp + 1], p[mt][kp], b[2], b[3]);
          }
        }
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's load
  }

  // Epilogue: finish the row sums over the quad, normalize, store pairs of elements.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = 1.0f / sum;
      const int row = q0 + warp_row0 + mt * 16 + lane / 4 + h * 8;
      if (row >= q_len) continue;
      T* dst = out + (static_cast<std::int64_t>(q_begin + row) * num_heads + head) * kHeadDim +
               (lane % 4) * 2;
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        *reinterpret_cast<std::uint32_t*>(dst + dt * 8) =
            pack2<T>(o[mt][dt][2 * h] * inv, o[mt][dt][2 * h + 1] * inv);
      }
    }
  }
}

template <typename T, typename C, int kHeadDim, int kMTiles, int kBlockN>
Status launch_instance(const PagedAttentionParams& p, std::int64_t max_query_len,
                       cudaStream_t stream) {
  using Shape = Tile<kHeadDim, kMTiles, kBlockN>;
  const std::int64_t q_tiles = (max_query_len + Shape::kBlockM - 1) / Shape::kBlockM;
  if (q_tiles > 65535 || p.num_heads > 0x7fffffff) {
    return invalid_argument("paged prefill attention (mma): too many query tiles");
  }
  const dim3 grid(static_cast<unsigned>(p.num_heads), static_cast<unsigned>(q_tiles),
                  static_cast<unsigned>(p.num_seqs));
  const auto block_size = static_cast<int>(p.cache.block_size);
  const int block_shift = (block_size & (block_size - 1)) == 0 ? __builtin_ctz(block_size) : -1;
  constexpr int kShared = Shape::kSharedBytes;
  auto* kernel = paged_prefill_mma_kernel<T, C, kHeadDim, kMTiles, kBlockN>;
  PAGODA_RETURN_IF_ERROR(
      (cuda::opt_in_shared_memory<paged_prefill_mma_kernel<T, C, kHeadDim, kMTiles, kBlockN>,
                                  kShared>()));
  if (!Shape::kSoftCap && p.logit_softcap != 0.0f) {
    return unimplemented(
        "paged prefill attention (mma): no soft-cap in the 128 x 64 tile at head_dim 128 (kMma32 "
        "and kMma16 have it)");
  }
  const SoftCap cap = soft_cap_in_units(p.logit_softcap, 1.0f / p.softmax_scale);  // raw q.k
  return launch_kernel(kernel, grid, kThreads, kShared, stream, "paged_prefill_mma_kernel",
                       static_cast<const T*>(p.q), p.q_row_stride, static_cast<T*>(p.out),
                       static_cast<const C*>(p.cache.k), static_cast<const C*>(p.cache.v),
                       p.query_start_loc, p.seq_lens, p.block_tables, p.max_blocks_per_seq,
                       static_cast<int>(p.num_heads), static_cast<int>(p.cache.num_kv_heads),
                       block_size, block_shift, p.softmax_scale * kLog2e, cap.cap, cap.inv_cap,
                       static_cast<int>(q_tiles), p.cache.k_scale, p.cache.v_scale,
                       p.skip_single_query, static_cast<int>(p.sliding_window));
}

/// The entry for one dtype T (bf16 or f16) and cache element C (T or __nv_fp8_e4m3);
/// `rows_per_warp` 16 or 32; `keys_per_tile` 32 or 64 picks the key tile of 32 rows per warp at
/// d128 (d64 and 16 rows per warp always take 64). Instantiated in paged_prefill_mma_<dtype>.cu
/// and paged_prefill_mma_fp8.cu.
template <typename T, typename C>
Status run_paged_prefill_mma(const PagedAttentionParams& p, std::int64_t max_query_len,
                             int rows_per_warp, int keys_per_tile, cudaStream_t stream) {
  const bool two = rows_per_warp == 32;
  switch (p.cache.head_dim) {
    case 64:
      return two ? launch_instance<T, C, 64, 2, 64>(p, max_query_len, stream)
                 : launch_instance<T, C, 64, 1, 64>(p, max_query_len, stream);
    case 128:
      // 128 x 64 is FA2's tile on the A100/H100: each K/V tile in shared memory serves twice the
      // queries of 64 x 64 and Q is re-read half as often per key as at 128 x 32 (ldmatrix and
      // cp.async traffic per mma 1.5 against 1.75 and 2.5 shared-memory cycles); it fits the 255
      // registers of 2 CTAs per SM only with the conditional O rescale (CUDA 13's ptxas: 255
      // registers and 12 bytes of spills; 60 with an FP8 cache's conversion).
      if (!two) return launch_instance<T, C, 128, 1, 64>(p, max_query_len, stream);
      return keys_per_tile == 64 ? launch_instance<T, C, 128, 2, 64>(p, max_query_len, stream)
                                 : launch_instance<T, C, 128, 2, 32>(p, max_query_len, stream);
    case 256:
      // Gemma 3: 64 queries x 32 keys, Q re-read from shared memory (O alone takes 128
      // registers), 96 KB of shared memory, 2 CTAs per SM.
      if (two) {
        return unimplemented("paged prefill attention (mma): head_dim 256 takes 16 rows a warp");
      }
      return launch_instance<T, C, 256, 1, 32>(p, max_query_len, stream);
    default: return unimplemented("paged prefill attention (mma): head_dim must be 64, 128 or 256");
  }
}

}  // namespace pagoda::kernels::prefill_mma
