// Tensor-core paged decode attention for bf16 and f16 (DecodeKernel::kTensorCores); the contract
// is paged_attention.h's, and the CUDA-core kernels in paged_decode_kernel.cuh are what it is
// tested against. Included by paged_decode_<dtype>.cu.
//
// CTA = (sequence, KV head, chunk of up to 8 q heads of its group, split), as in the CUDA-core
// kernels. The group's q heads are the rows of an mma tile: rows 0 .. num_q - 1 hold them, rows
// num_q .. 15 are zero (their scores are 0 and their outputs are never stored), so one K/V byte
// feeds every head of the group and the dot products, lane sums and P V run on the tensor cores
// instead of as FMAs and shuffles (the CUDA-core kernel spends ~550 instructions of a warp per
// 4 KB of K/V on them; here a 16-key tile of 8 KB takes 32 mma and 16 ldmatrix at d128).
//
// The split's keys are cut into 16-key tiles aligned to multiples of 16 positions (keys before
// the split's start or at or past its end are masked); warp w takes tiles w, w + 4, w + 8, ...
// through its own ring of kStages tiles in shared memory (cp.async, kStages - 1 tiles ahead of
// the math; a warp's copies and ldmatrix reads meet at __syncwarp, so the warps never wait for
// each other in the loop). Per tile, with the layout of the prefill mma kernel:
//
//   S = Q K^T   mma m16n8k16: A = the q heads (registers, loaded once), B = K by ldmatrix
//   P = exp2(S * scale_log2 - m), online softmax per row (the 4 lanes of a quad share a row)
//   O += P V    P re-packed from the S accumulators (rounded to bf16/f16: the tensor-core
//               prefill does the same), V by ldmatrix.trans
//
// At the end the 4 warps' (m, l, O) merge through shared memory as the CUDA-core kernel's token
// groups do, into out or the split's partial (o, lse).
//
// An FP8 cache (C = __nv_fp8_e4m3): the ring holds the tiles' codes (half the bytes, so one stage
// more of them is in flight), and once a tile lands the warp turns its codes into 16-bit values in
// one swizzled K and V tile of its own (exact: e4m3 values are bf16/f16 values), which the
// ldmatrix reads as above. The per-tensor scales never enter a tile: k_scale folds into the
// softmax scale (and the soft-cap's units), v_scale multiplies O at the end.
//
// The direct FP8 variant (kDirect, DecodeKernel::kTensorCoresDirect) skips the converted tiles:
// the mma runs in f16 whatever T is (q rounded to f16 once, P packed as f16), and each lane
// builds its B fragments from 32-bit loads of the codes, one cvt.f16x2.e4m3x2 per two codes:
//   K: a lane's 4 k-slots of a 16-dim step are 4 consecutive dims (16 kk + 4t .. + 3; q's A
//      fragment takes its dims in the same order), one load of row `key` per k-step;
//   V: n-tile j of a group of 4 (dims 32 q' ..) holds dims 32 q' + 4 n + j, so one 32-bit load
//      of a key's row gives a lane its dim of all 4 n-tiles; 4 loads (keys 2t, 2t+1, 2t+8, 2t+9)
//      and a byte permute per fragment make the group's B fragments.
// The code rows land with their 16-byte chunks swizzled by row, so both loads are free of bank
// conflicts at d128. O's columns follow the V mapping, undone when the warps merge.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/fp8_codes.cuh"
#include "kernels/attention/paged_attention.h"
#include "kernels/attention/paged_decode_cta.cuh"
#include "kernels/attention/soft_cap.cuh"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"

namespace pagoda::kernels::decode_mma {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileKeys = 16;
constexpr int kMaxRows = 8;  // q heads per CTA: the rows g of the lanes (g = lane / 4 < 8)
constexpr float kLog2e = 1.4426950408889634f;

/// kCodeBytes: bytes per cache element (2: bf16/f16, the tile itself; 1: e4m3 codes); kDirect:
/// FP8 fragments built from the codes (no converted tiles).
template <int kHeadDim, int kCodeBytes, bool kDirect = false>
struct DecodeMmaShape {
  static constexpr bool kFp8 = kCodeBytes == 1;
  static_assert(!kDirect || kFp8, "the direct variant reads FP8 codes");
  static constexpr int kChunks = kHeadDim / 8;                     // 16-byte chunks per tile row
  static constexpr int kCacheChunks = kHeadDim * kCodeBytes / 16;  // ... per cache row
  static constexpr int kElemsPerChunk = 16 / kCodeBytes;           // cache elements per chunk
  static constexpr int kRowsPerPass = 32 / kCacheChunks;           // rows one warp copies at once
  static constexpr int kPasses = kTileKeys / kRowsPerPass;         // copies per lane per K (V) tile
  static constexpr int kTileBytes = kTileKeys * kHeadDim * 2;      // one 16-bit K or V tile
  static constexpr int kCacheTileBytes = kTileKeys * kHeadDim * kCodeBytes;  // ... as copied
  // Direct: the converted tiles' bytes go to two more stages (the same shared memory).
  static constexpr int kStages = kDirect ? 6 : kFp8 ? 4 : 3;
  // Per warp: the ring of copied K, V tiles, then (FP8, not direct) the converted K and V tiles.
  static constexpr int kConvertedOffset = kStages * 2 * kCacheTileBytes;
  static constexpr int kWarpRingBytes = kConvertedOffset + (kFp8 && !kDirect ? 2 * kTileBytes : 0);
  // Direct: cache rows per 128 bytes (the bank period), for the chunk swizzle.
  static constexpr int kRowsPer128 =
      kHeadDim * kCodeBytes >= 128 ? 1 : 128 / (kHeadDim * kCodeBytes);
  static constexpr int kRingBytes = kWarps * kWarpRingBytes;  // 96 KB at d128 either way
  static constexpr int kMergeBytes = kWarps * kMaxRows * (kHeadDim + 2) * 4;
  static constexpr int kSharedBytes = kRingBytes > kMergeBytes ? kRingBytes : kMergeBytes;
  static_assert(kChunks >= 8 && 32 % kCacheChunks == 0, "rows of 4 to 32 chunks (d 64 to 256)");
};

/// Direct variant: byte offset of (row, 16-byte chunk) in a warp's tile of code rows: chunk c of
/// row r at chunk c ^ ((r / kRowsPer128) % kCacheChunks), so 8 rows' same chunk fall in distinct
/// banks.
template <typename Shape>
__device__ __forceinline__ std::uint32_t code_chunk(int row, int chunk) {
  return static_cast<std::uint32_t>(
      row * Shape::kCacheChunks * 16 +
      ((chunk ^ ((row / Shape::kRowsPer128) % Shape::kCacheChunks)) * 16));
}

/// Two e4m3 codes (bytes 0 and 1 of `pair`) as an f16x2 word, byte 0 in the low half; exact.
__device__ __forceinline__ std::uint32_t e4m3x2_to_f16x2(std::uint32_t pair) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xFFFFu), __NV_E4M3);
  return static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
}

/// A 16-bit activation as f16 for the direct variant's mma, clamped to f16's range (a q beyond
/// +-65504 is no model's; clamping keeps it finite). A NaN stays NaN, as in the other kernels
/// (fminf / fmaxf would turn it into -65504).
template <typename T>
__device__ __forceinline__ float f16_range(T v) {
  const float x = to_float(v);
  return isnan(x) ? x : fminf(fmaxf(x, -65504.0f), 65504.0f);
}

template <typename T, typename C, int kHeadDim, bool kDirect = false>
__global__ void __launch_bounds__(kThreads, 2)
    paged_decode_mma_kernel(const T* __restrict__ q, std::int64_t q_row_stride, T* __restrict__ out,
                            const C* __restrict__ k_cache, const C* __restrict__ v_cache,
                            const std::int32_t* __restrict__ query_start_loc,
                            const std::int32_t* __restrict__ seq_lens,
                            const std::int32_t* __restrict__ block_tables,
                            std::int64_t max_blocks_per_seq, int num_heads, int num_kv_heads,
                            int block_size, float scale_log2, float softcap, float inv_softcap,
                            float v_scale, int sliding_window, int num_splits, int partition_size,
                            const std::int32_t* __restrict__ device_partition_size,
                            float* __restrict__ partial_out, float* __restrict__ partial_lse,
                            const std::int32_t* __restrict__ seq_ids) {
  using Shape = DecodeMmaShape<kHeadDim, sizeof(C), kDirect>;
  static_assert(Shape::kFp8 == !std::is_same_v<C, T>, "C is T or an 8-bit code");
  // The mma's 16-bit type: T, or f16 in the direct variant (codes widen to f16 in one cvt).
  using M = std::conditional_t<kDirect, __half, T>;
  constexpr int kCacheChunks = Shape::kCacheChunks;
  constexpr int kPasses = Shape::kPasses;
  constexpr int kStages = Shape::kStages;
  constexpr int kKSteps = kHeadDim / 16;  // k-steps of Q K^T
  constexpr int kDTiles = kHeadDim / 8;   // 8-dim column tiles of O
  constexpr std::uint32_t kTileBytes = Shape::kTileBytes;
  constexpr std::uint32_t kCacheTileBytes = Shape::kCacheTileBytes;
  PAGODA_DYNAMIC_SHARED_ALIGNED(decode_mma_smem, 128);

  if (device_partition_size != nullptr) partition_size = *device_partition_size;
  const decode::DecodeCta cta = decode::decode_cta<kMaxRows>(
      seq_ids, seq_lens, query_start_loc, num_heads, num_kv_heads, sliding_window, partition_size);
  const int row = cta.row, seq = cta.seq, kv_head = cta.kv_head, first_q_head = cta.first_q_head;
  const int num_q = cta.num_q, split = cta.split, start = cta.start, end = cta.end;
  const std::int64_t token_row = cta.token_row;
  // Launched with PDL: q (the QKV projection's output) and out are touched only after this.
  pdl_wait();
  if (start >= end) {
    decode::write_empty_split<T, kHeadDim, kThreads>(cta, out, partial_out, partial_lse, num_heads,
                                                     num_splits);
    return;
  }

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;  // the lane's row (q head) in the fragments
  const int t = lane % 4;
  const int first_key = start / kTileKeys * kTileKeys;
  const int num_tiles = (end - first_key + kTileKeys - 1) / kTileKeys;
  // This warp's tiles: warp, warp + kWarps, ...
  const int my_tiles = warp < num_tiles ? (num_tiles - warp + kWarps - 1) / kWarps : 0;
  const auto tile_key = [&](int i) { return first_key + (warp + i * kWarps) * kTileKeys; };

  // Copies: lane copies chunk lane % kCacheChunks of rows lane / kCacheChunks + p * kRowsPerPass.
  const std::int32_t* table = block_tables + seq * max_blocks_per_seq;
  const int cp_row = lane / kCacheChunks;
  const int cp_chunk = lane % kCacheChunks;
  const std::uint32_t ring =
      smem_u32(decode_mma_smem) + static_cast<std::uint32_t>(warp * Shape::kWarpRingBytes);
  // Tile keys outside [start, end) read the nearest key inside (they are masked): past the end
  // the last one, before the start the first, since a sliding group's table has no pages (-1)
  // below the window, which a 16-aligned tile can reach into.
  const auto clamp_key = [&](int key) { return min(max(key, start), end - 1); };
  const auto fetch_ids = [&](int key0, int(&ids)[kPasses]) {
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      ids[p] = table[clamp_key(key0 + cp_row + p * Shape::kRowsPerPass) / block_size];
    }
  };
  const auto issue = [&](int key0, int stage, const int(&ids)[kPasses]) {
    const std::uint32_t k_stage = ring + stage * 2 * kCacheTileBytes;
#pragma unroll
    for (int p = 0; p < kPasses; ++p) {
      const int tile_row = cp_row + p * Shape::kRowsPerPass;
      const int key = clamp_key(key0 + tile_row);
      const std::int64_t offset =
          ((static_cast<std::int64_t>(ids[p]) * num_kv_heads + kv_head) * block_size +
           key % block_size) *
              kHeadDim +
          cp_chunk * Shape::kElemsPerChunk;
      // 16-bit rows land swizzled for ldmatrix; codes land in plain rows (only the conversion
      // reads them, a lane a chunk), or swizzled by row for the direct variant's loads.
      const std::uint32_t dst =
          kDirect       ? code_chunk<Shape>(tile_row, cp_chunk)
          : Shape::kFp8 ? static_cast<std::uint32_t>(tile_row * kHeadDim + cp_chunk * 16)
                        : swizzled<kHeadDim>(tile_row, cp_chunk);
      cp_async_16(k_stage + dst, k_cache + offset, true);
      cp_async_16(k_stage + kCacheTileBytes + dst, v_cache + offset, true);
    }
  };

  int ids[kPasses];
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < my_tiles) {
      fetch_ids(tile_key(st), ids);
      issue(tile_key(st), st, ids);
    }
    cp_async_commit();
  }
  if (kStages - 1 < my_tiles) fetch_ids(tile_key(kStages - 1), ids);

  // The q heads as A fragments: a0 = (row g, dims 16 kk + 2t, +1), a2 = (row g, dims +8); rows
  // g + 8 (a1, a3) and rows past num_q are zero.
  std::uint32_t qa[kKSteps][4];
  if constexpr (kDirect) {
    // Lane t's k-slots of step kk are dims 16 kk + 4t .. + 3, as its K loads take them.
    const T* q_row = q + token_row * q_row_stride + (first_q_head + g) * kHeadDim + 4 * t;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const T* d = q_row + kk * 16;
      qa[kk][0] = g < num_q ? pack2<M>(f16_range(d[0]), f16_range(d[1])) : 0u;
      qa[kk][1] = 0u;
      qa[kk][2] = g < num_q ? pack2<M>(f16_range(d[2]), f16_range(d[3])) : 0u;
      qa[kk][3] = 0u;
    }
  } else {
    const T* q_row = q + token_row * q_row_stride + (first_q_head + g) * kHeadDim + 2 * t;
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      qa[kk][0] = g < num_q ? *reinterpret_cast<const std::uint32_t*>(q_row + kk * 16) : 0u;
      qa[kk][1] = 0u;
      qa[kk][2] = g < num_q ? *reinterpret_cast<const std::uint32_t*>(q_row + kk * 16 + 8) : 0u;
      qa[kk][3] = 0u;
    }
  }

  float o[kDTiles][4];
#pragma unroll
  for (int dt = 0; dt < kDTiles; ++dt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[dt][i] = 0.0f;
  }
  float m = -INFINITY;  // running max of row g's raw scores
  float l = 0.0f;       // this lane's share of row g's sum (reduced over the quad at the end)

  // ldmatrix lanes, as in the prefill kernel: K non-transposed (two 8-key tiles x 16 dims per
  // x4), V transposed (16 keys x two 8-dim tiles); chunk c0 + 2k of a lane's fixed row is
  // swizzled(row, c0) ^ (k << 5).
  const std::uint32_t k_lane = swizzled<kHeadDim>((lane % 8) + (lane / 16) * 8, (lane / 8) % 2);
  const std::uint32_t v_lane = swizzled<kHeadDim>((lane % 8) + ((lane / 8) % 2) * 8, lane / 16);

  int stage = 0;
  for (int i = 0; i < my_tiles; ++i) {
    const int ahead = i + kStages - 1;
    const int ahead_stage = stage == 0 ? kStages - 1 : stage - 1;
    __syncwarp();  // every lane's ldmatrix of the stage refilled here (tile i - 1) is done
    if (ahead < my_tiles) issue(tile_key(ahead), ahead_stage, ids);
    cp_async_commit();
    if (ahead + 1 < my_tiles) fetch_ids(tile_key(ahead + 1), ids);
    cp_async_wait<kStages - 1>();  // this lane's copies of tile i have landed
    __syncwarp();                  // and every other lane's
    std::uint32_t k_stage = ring + stage * 2 * kCacheTileBytes;
    std::uint32_t v_stage = k_stage + kCacheTileBytes;
    if constexpr (Shape::kFp8 && !kDirect) {
      // The codes to the warp's 16-bit K and V tiles; every lane's ldmatrix of the previous tile
      // ended at the loop's first __syncwarp.
      unsigned char* warp_smem = decode_mma_smem + warp * Shape::kWarpRingBytes;
      unsigned char* codes = warp_smem + stage * 2 * kCacheTileBytes;
      unsigned char* tiles = warp_smem + Shape::kConvertedOffset;
#pragma unroll
      for (int e = lane; e < kTileKeys * kCacheChunks; e += 32) {
        const int r = e / kCacheChunks;
        const int c = e % kCacheChunks;
        const std::uint32_t to0 = swizzled<kHeadDim>(r, 2 * c);
        const std::uint32_t to1 = swizzled<kHeadDim>(r, 2 * c + 1);
#pragma unroll
        for (int kv = 0; kv < 2; ++kv) {
          uint4 lo, hi;
          fp8_codes_to_halves<T>(
              *reinterpret_cast<const uint4*>(codes + kv * kCacheTileBytes + r * kHeadDim + c * 16),
              lo, hi);
          *reinterpret_cast<uint4*>(tiles + kv * kTileBytes + to0) = lo;
          *reinterpret_cast<uint4*>(tiles + kv * kTileBytes + to1) = hi;
        }
      }
      __syncwarp();
      k_stage = ring + Shape::kConvertedOffset;
      v_stage = k_stage + kTileBytes;
    }
    stage = stage == kStages - 1 ? 0 : stage + 1;

    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    if constexpr (kDirect) {
      // Key nt * 8 + g's dims 16 kk + 4t .. + 3: b0 the first two, b1 the last two.
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          std::uint32_t codes;
          lds_u32(codes, k_stage + code_chunk<Shape>(nt * 8 + g, kk) + 4 * t);
          mma_16816<M>(s[nt], qa[kk], e4m3x2_to_f16x2(codes), e4m3x2_to_f16x2(codes >> 16));
        }
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < kKSteps; ++kk) {
        std::uint32_t b[4];
        ldmatrix_x4(b, k_stage + (k_lane ^ (kk << 5)));
        mma_16816<T>(s[0], qa[kk], b[0], b[1]);
        mma_16816<T>(s[1], qa[kk], b[2], b[3]);
      }
    }

    // Soft-cap in the raw q.k units of s (uniform: a kernel parameter), before the mask; only
    // row g's two scores per 8-key tile are used (rows 8-15, j = 2 and 3, are the zero rows).
    if (softcap != 0.0f) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int j = 0; j < 2; ++j) s[nt][j] = apply_soft_cap(s[nt][j], softcap, inv_softcap);
      }
    }
    // Row g's 4 scores in this lane: keys key0 + 8 nt + 2t + j. Masked keys score -inf.
    const int key0 = tile_key(i);
    float tile_max = m;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = key0 + nt * 8 + 2 * t + j;
        if (key < start || key >= end) s[nt][j] = -INFINITY;
        tile_max = fmaxf(tile_max, s[nt][j]);
      }
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    // Every tile holds a key of the split (the first one holds `start`), so tile_max is finite;
    // the first tile's correction is exp2(-inf) = 0.
    const float correction = fast_exp2((m - tile_max) * scale_log2);
    m = tile_max;
    const float max_scaled = tile_max * scale_log2;
    float p[2][2];
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        p[nt][j] = fast_exp2(fmaf(s[nt][j], scale_log2, -max_scaled));
        sum += p[nt][j];
      }
    }
    l = l * correction + sum;
    // A correction of exactly 1 (max unchanged) changes no bit: skip the rescale then.
    if (__any_sync(0xffffffffu, correction != 1.0f)) {
#pragma unroll
      for (int dt = 0; dt < kDTiles; ++dt) {
        o[dt][0] *= correction;
        o[dt][1] *= correction;
      }
    }
    // P as the A fragment of P V: row g, keys 2t, 2t+1 (a0) and 8 + 2t, 8 + 2t + 1 (a2).
    const std::uint32_t pa[4] = {pack2<M>(p[0][0], p[0][1]), 0u, pack2<M>(p[1][0], p[1][1]), 0u};
    if constexpr (kDirect) {
      // Group gq of 4 n-tiles: lane g's dims 32 gq + 4g .. + 3 of keys 2t, 2t+1, 2t+8, 2t+9;
      // n-tile j takes byte j of each (its column g is dim 32 gq + 4g + j).
#pragma unroll
      for (int gq = 0; gq < kDTiles / 4; ++gq) {
        const int chunk = 2 * gq + g / 4;
        const std::uint32_t in_chunk = 4 * (g % 4);
        std::uint32_t r[4];
        lds_u32(r[0], v_stage + code_chunk<Shape>(2 * t, chunk) + in_chunk);
        lds_u32(r[1], v_stage + code_chunk<Shape>(2 * t + 1, chunk) + in_chunk);
        lds_u32(r[2], v_stage + code_chunk<Shape>(2 * t + 8, chunk) + in_chunk);
        lds_u32(r[3], v_stage + code_chunk<Shape>(2 * t + 9, chunk) + in_chunk);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const std::uint32_t select = static_cast<std::uint32_t>(j | ((4 + j) << 4));
          mma_16816<M>(o[4 * gq + j], pa, e4m3x2_to_f16x2(__byte_perm(r[0], r[1], select)),
                       e4m3x2_to_f16x2(__byte_perm(r[2], r[3], select)));
        }
      }
    } else {
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, v_stage + (v_lane ^ (dp << 5)));
        mma_16816<T>(o[2 * dp], pa, b[0], b[1]);
        mma_16816<T>(o[2 * dp + 1], pa, b[2], b[3]);
      }
    }
  }

  pdl_launch_dependents();
  // Merge the warps: (m, l, O) of each warp's rows to shared memory (over its ring: every warp
  // must be done reading), then every thread combines one (q head, dim) across warps.
  cp_async_wait<0>();
  __syncthreads();
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  auto& warp_o = *reinterpret_cast<float(*)[kWarps][kMaxRows][kHeadDim]>(decode_mma_smem);
  auto& warp_m = *reinterpret_cast<float(*)[kWarps][kMaxRows]>(
      decode_mma_smem + sizeof(float) * kWarps * kMaxRows * kHeadDim);
  auto& warp_l = *reinterpret_cast<float(*)[kWarps][kMaxRows]>(
      decode_mma_smem + sizeof(float) * kWarps * kMaxRows * (kHeadDim + 1));
  if (g < num_q) {
    if (t == 0) {
      warp_m[warp][g] = m;
      warp_l[warp][g] = l;
    }
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt) {
      if constexpr (kDirect) {
        // Column n of n-tile 4 gq + j is dim 32 gq + 4n + j; this lane holds n = 2t, 2t + 1.
        const int d0 = 32 * (dt / 4) + 8 * t + dt % 4;
        warp_o[warp][g][d0] = o[dt][0];
        warp_o[warp][g][d0 + 4] = o[dt][1];
      } else {
        warp_o[warp][g][dt * 8 + 2 * t] = o[dt][0];
        warp_o[warp][g][dt * 8 + 2 * t + 1] = o[dt][1];
      }
    }
  }
  __syncthreads();

  for (int e = threadIdx.x; e < num_q * kHeadDim; e += kThreads) {
    const int h = e / kHeadDim;  // the q head within the chunk (not `row`, the CTA's place)
    const int d = e % kHeadDim;
    float m_max = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_max = fmaxf(m_max, warp_m[w][h]);
    float l_sum = 0.0f;
    float acc = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      // A warp that had no tile has m = -inf and weight 0.
      const float weight =
          warp_m[w][h] == -INFINITY ? 0.0f : fast_exp2((warp_m[w][h] - m_max) * scale_log2);
      l_sum += warp_l[w][h] * weight;
      acc += warp_o[w][h][d] * weight;
    }
    const int q_head = first_q_head + h;
    // v_scale: 1 over a 16-bit cache (exact), the codes' scale over an FP8 one.
    if (num_splits == 1) {
      out[(token_row * num_heads + q_head) * kHeadDim + d] = from_float<T>(acc / l_sum * v_scale);
    } else {
      const std::int64_t slot =
          (static_cast<std::int64_t>(row) * num_heads + q_head) * num_splits + split;
      partial_out[slot * kHeadDim + d] = acc / l_sum * v_scale;
      if (d == 0) partial_lse[slot] = m_max * scale_log2 + log2f(l_sum);
    }
  }
}

template <typename T, typename C, int kHeadDim, bool kDirect>
Status launch_instance(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                       const DecodeWorkspace& w, cudaStream_t stream) {
  constexpr int kShared = DecodeMmaShape<kHeadDim, sizeof(C), kDirect>::kSharedBytes;
  PAGODA_RETURN_IF_ERROR(
      (cuda::opt_in_shared_memory<paged_decode_mma_kernel<T, C, kHeadDim, kDirect>, kShared>()));
  const int group_size = static_cast<int>(p.num_heads / p.cache.num_kv_heads);
  const int chunks = (group_size + kMaxRows - 1) / kMaxRows;
  const dim3 grid(static_cast<unsigned>(p.num_seqs),
                  static_cast<unsigned>(p.cache.num_kv_heads * chunks),
                  static_cast<unsigned>(plan.num_splits));
  // Scores in the kernel are q.k over the tile's values: raw q.k for a 16-bit cache, q.code for
  // FP8 (the true score times 1 / k_scale).
  constexpr bool kFp8 = !std::is_same_v<C, T>;
  const float k_scale = kFp8 ? p.cache.k_scale : 1.0f;
  const float v_scale = kFp8 ? p.cache.v_scale : 1.0f;
  const SoftCap cap = soft_cap_in_units(p.logit_softcap, 1.0f / (p.softmax_scale * k_scale));
  return launch_pdl(paged_decode_mma_kernel<T, C, kHeadDim, kDirect>, grid, dim3(kThreads), kShared,
                    stream, "paged_decode_mma_kernel", static_cast<const T*>(p.q), p.q_row_stride,
                    static_cast<T*>(p.out), static_cast<const C*>(p.cache.k),
                    static_cast<const C*>(p.cache.v), p.query_start_loc, p.seq_lens, p.block_tables,
                    p.max_blocks_per_seq, static_cast<int>(p.num_heads),
                    static_cast<int>(p.cache.num_kv_heads), static_cast<int>(p.cache.block_size),
                    p.softmax_scale * k_scale * kLog2e, cap.cap, cap.inv_cap, v_scale,
                    static_cast<int>(p.sliding_window), plan.num_splits, plan.partition_size,
                    plan.device_partition_size, w.partial_out, w.partial_lse, p.decode_seq_ids);
}

/// The entry for one dtype T (bf16 or f16) and cache element C (T or __nv_fp8_e4m3), head_dim
/// 64 or 128, kDirect only over FP8; instantiated in paged_decode_<dtype>.cu and
/// paged_decode_mma_fp8.cu.
template <typename T, typename C, bool kDirect = false>
Status run_paged_decode_mma(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                            const DecodeWorkspace& w, cudaStream_t stream) {
  switch (p.cache.head_dim) {
    case 64: return launch_instance<T, C, 64, kDirect>(p, plan, w, stream);
    case 128: return launch_instance<T, C, 128, kDirect>(p, plan, w, stream);
    default:
      return unimplemented("paged decode attention (tensor cores): head_dim must be 64 or 128");
  }
}

}  // namespace pagoda::kernels::decode_mma
