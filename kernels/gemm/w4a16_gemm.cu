#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/async_copy.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/w4a16_gemm.h"
#include "kernels/gemm/w4a16_gemm_plan.h"
#include "kernels/gemm/w4a16_gemm_shape.h"
#include "quant/w4a16_layout.h"

namespace pagoda::kernels {

namespace {

using namespace w4a16;

// Codes {q_lo, q_hi} OR'ed into a 16-bit float pair whose exponent makes the mantissa's low bits
// the integer: bf16 128 + q (mantissa step 1 at 128..255), f16 1024 + q. Subtracting
// {base + z, base + z} leaves q - z exactly.
template <typename T>
struct Nibbles;
template <>
struct Nibbles<__nv_bfloat16> {
  static constexpr std::uint32_t kMagic = 0x43004300u;
  static constexpr std::uint32_t kBase = 0x4300u;
  static constexpr std::uint32_t kOne = 0x3F803F80u;      // {1, 1}
  static constexpr std::uint32_t kSixteen = 0x41804180u;  // {16, 16}
  __device__ static __forceinline__ std::uint32_t sub(std::uint32_t a, std::uint32_t b) {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
  // a * b + c, one rounding.
  __device__ static __forceinline__ std::uint32_t fma(std::uint32_t a, std::uint32_t b,
                                                      std::uint32_t c) {
    const __nv_bfloat162 r = __hfma2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b),
                                     *reinterpret_cast<const __nv_bfloat162*>(&c));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
};
template <>
struct Nibbles<__half> {
  static constexpr std::uint32_t kMagic = 0x64006400u;
  static constexpr std::uint32_t kBase = 0x6400u;
  static constexpr std::uint32_t kOne = 0x3C003C00u;      // {1, 1}
  static constexpr std::uint32_t kSixteen = 0x4C004C00u;  // {16, 16}
  __device__ static __forceinline__ std::uint32_t sub(std::uint32_t a, std::uint32_t b) {
    const __half2 r =
        __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
  __device__ static __forceinline__ std::uint32_t fma(std::uint32_t a, std::uint32_t b,
                                                      std::uint32_t c) {
    const __half2 r =
        __hfma2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b),
                *reinterpret_cast<const __half2*>(&c));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
};

// The weights' device arrays (W4A16Weights, typed); the GGUF form's are null in the zero-point
// form and the other way round.
struct KernelWeights {
  const uint4* packed;
  const std::uint32_t* packed_hi;  // kGguf5 / 6 / 8: hi_bits words per lane per tile
  const __half* scales;
  const std::uint8_t* zeros;  // zero-point form
  const std::int8_t* scale_codes;
  const __half* mins;  // GGUF form with a min term, else null
  const std::int8_t* min_codes;
  int super_shift;
  int code_zero;
};

// CTA = (4 16-row weight tiles, K split, block of 16 * kMTiles rows of x), one weight tile per
// warp. The CTA copies its rows of x over its K range into shared memory, a chunk at a time, and
// the 4 warps share it: each walks its tile's 64-column tiles over the range; per 16-column step
// it accumulates x (q - z) in `part`, and where a group ends it adds scale * part to `acc`. A
// group's zeros and scales come through the ring with the tile where it begins, kStages tiles
// ahead, so no step waits on a load the ring did not already hide.
//
// The GGUF form (quant/w4a16_layout.h) differs in three places: the zero is one code_zero for
// the matrix; a wider code's high bits come from packed_hi (its lane's hi_bits words per tile,
// copied beside the tile) and join the low nibble: 5- and 6-bit codes OR'ed in above it, into
// {magic + q} (q < 64: exact in bf16 and fp16), 8-bit ones as hi * 16 + (lo - code_zero) in one
// FMA, exact (|q - z| <= 255 has at most 8 significant bits); and where the type has a min, one
// more mma per step sums x itself (B = ones) into `part_x`, so a group closes with
// acc += (S sc) part + (B mc) part_x, the min term w = ... + B mc multiplied out of the sum.
// y[at] = sum rounded once: to T, or (y_fp32: the LM head's logits) kept in fp32.
template <typename T>
__device__ __forceinline__ void store_output(void* y, bool y_fp32, std::size_t at, float sum) {
  if (y_fp32) {
    static_cast<float*>(y)[at] = sum;
  } else {
    static_cast<T*>(y)[at] = from_float<T>(sum);
  }
}

template <typename T, int kMTiles, Form kForm>
__global__ void __launch_bounds__(kThreads, min_ctas_per_sm(kMTiles, kForm))
    w4a16_gemm_kernel(const T* __restrict__ x, const KernelWeights w, const T* __restrict__ bias,
                      void* __restrict__ y, bool y_fp32, float* __restrict__ partial, int m, int n,
                      int k, int k_tiles, int padded_rows, int group_size, int groups,
                      int tiles_per_split, int chunk_tiles, int* __restrict__ counters) {
  using Q = Nibbles<T>;
  constexpr bool kGguf = kForm != Form::kZeroPoint;
  constexpr int kHiBits = hi_bits_of(kForm);
  constexpr int kSlotBytes = slot_bytes(kForm);
  const int stage = stage_bytes(kForm, group_size);
  PAGODA_DYNAMIC_SHARED(smem);
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int nt = static_cast<int>(blockIdx.x) * kWarps + warp;
  const int split = static_cast<int>(blockIdx.y);
  const bool has_tile = nt < padded_rows / kTileRows;  // the last CTA's warps may have none
  const int row0 = static_cast<int>(blockIdx.z) * kMTiles * 16;
  const int rows_here = min(kMTiles * 16, m - row0);
  const bool has_min = kGguf && w.mins != nullptr;

  const int cta_begin = split * tiles_per_split;
  const int cta_end = min(k_tiles, cta_begin + tiles_per_split);
  // The tiles this warp walks, the CTA's whole K range.
  const int count = has_tile ? max(0, cta_end - cta_begin) : 0;
  T* xs = reinterpret_cast<T*>(smem);
  const int stride = chunk_tiles * kTileCols + kXPad;
  // The buffers of x chunks, then each warp's ring of kStages stages (16-byte aligned: a row of
  // x is a multiple of 16 bytes).
  const int x_rows = min(kMTiles * 16, m);
  const unsigned char* ring =
      reinterpret_cast<const unsigned char*>(xs + x_buffers(kMTiles) * x_rows * stride) +
      warp * kStages * stage;

  float acc[kMTiles][2][4];
  float part[kMTiles][2][4];
  float part_x[kMTiles][4];  // GGUF form with a min: x summed over the group, C layout
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) part_x[mt][e] = 0.0f;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = part[mt][j][e] = 0.0f;
    }
  }
  // A fragments: rows mt * 16 + g (lo) and + 8 (hi), columns 2t, 2t + 1 and 2t + 8, 2t + 9.
  const T* x_lo[kMTiles];
  const T* x_hi[kMTiles];
  bool lo_ok[kMTiles], hi_ok[kMTiles];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    lo_ok[mt] = mt * 16 + g < rows_here;
    hi_ok[mt] = mt * 16 + g + 8 < rows_here;
    x_lo[mt] = xs + (lo_ok[mt] ? mt * 16 + g : 0) * stride + 2 * t;
    x_hi[mt] = xs + (hi_ok[mt] ? mt * 16 + g + 8 : 0) * stride + 2 * t;
  }
  const int col_c = nt * kTileRows + 2 * t;     // the C fragment's first output column, n-tile 0
  const int steps_per_group = group_size / 16;  // groups end on 16-column boundaries
  const bool whole_tile_groups = group_size % kTileCols == 0;
  const std::size_t tile_offset = static_cast<std::size_t>(nt) * k_tiles * kTileVectors + lane;
  const uint4* tiles = w.packed + tile_offset;
  const std::uint32_t* tiles_hi =
      kHiBits > 0 ? w.packed_hi + tile_offset * kHiBits : nullptr;  // hi_bits words per lane

  // The group slots' pieces: lane `lane` copies piece lane % pieces of slot lane / pieces, from
  // its array's row of the group (an S or B piece: of the group's super-block), 16 bytes at the
  // warp's 16 rows. Pieces in slot order: zero-point: scales rows 0-7, 8-15, zeros; GGUF: S rows
  // 0-7, 8-15, B rows 0-7, 8-15, sc, mc.
  constexpr int kPieces = kSlotBytes / 16;
  const int piece = lane % kPieces, piece_slot = lane / kPieces;
  const unsigned char* piece_base = nullptr;  // null: this lane copies nothing
  int piece_group_bytes = 0;                  // bytes between one group's row and the next
  bool piece_super = false;                   // indexed by super-block, not group
  if (has_tile && piece_slot < group_slots(group_size)) {
    const std::size_t row = static_cast<std::size_t>(nt) * kTileRows;
    if constexpr (kGguf) {
      const bool min_piece = piece == 2 || piece == 3 || piece == 5;
      if (has_min || !min_piece) {
        if (piece < 4) {
          piece_base = reinterpret_cast<const unsigned char*>((piece < 2 ? w.scales : w.mins) +
                                                              row + 8 * (piece & 1));
          piece_group_bytes = 2 * padded_rows;
          piece_super = true;
        } else {
          piece_base = reinterpret_cast<const unsigned char*>(
              (piece == 4 ? w.scale_codes : w.min_codes) + row);
          piece_group_bytes = padded_rows;
        }
      }
    } else {
      piece_base = piece < 2 ? reinterpret_cast<const unsigned char*>(w.scales + row + 8 * piece)
                             : w.zeros + row;
      piece_group_bytes = piece < 2 ? 2 * padded_rows : padded_rows;
    }
  }

  // Weights and their group metadata are read once, through the warp's ring in shared memory:
  // each lane copies its own 16 bytes of a tile (and its high bits, and maybe one piece of a
  // group slot) with cp.async, no registers held in flight, kStages tiles ahead of the math. The
  // ring runs over the CTA's whole K range, whatever the chunks of x.
  const std::uint32_t ring_addr = smem_u32(ring);
  const auto stage_at = [&](int i) { return (i % kStages) * stage; };
  const int hi_at = kTileVectors * 16 + lane * 4 * kHiBits;
  const int slots_at = tile_stage_bytes(kForm);
  // The group of the fetched tile's first column, and that column's place in it.
  int fetch_group = cta_begin * kTileCols / group_size;
  int fetch_offset = cta_begin * kTileCols - fetch_group * group_size;
  const auto fetch = [&](int i) {
    if (i < count) {
      const std::size_t at = static_cast<std::size_t>(cta_begin + i) * kTileVectors;
      const std::uint32_t dst = ring_addr + static_cast<std::uint32_t>(stage_at(i));
      cp_async_16(dst + lane * 16, tiles + at, true);
      if constexpr (kHiBits == 4) {
        cp_async_16(dst + hi_at, tiles_hi + at * kHiBits, true);
      } else if constexpr (kHiBits > 0) {
        if constexpr (kHiBits == 2) {
          cp_async_8(dst + hi_at, tiles_hi + at * kHiBits);
        } else {
          cp_async_4(dst + hi_at, tiles_hi + at * kHiBits);
        }
      }
      if (piece_base != nullptr) {
        // Groups past the last (the zero padding past cols) read the last one's.
        const int grp = min(fetch_group + piece_slot, groups - 1);
        const int index = piece_super ? grp >> w.super_shift : grp;
        cp_async_16(dst + slots_at + piece_slot * kSlotBytes + piece * 16,
                    piece_base + static_cast<std::size_t>(index) * piece_group_bytes, true);
      }
    }
    cp_async_commit();  // empty groups too: the wait below counts groups
    fetch_offset += kTileCols;
    while (fetch_offset >= group_size) {
      fetch_offset -= group_size;
      ++fetch_group;
    }
  };
#pragma unroll
  for (int u = 0; u < kStages; ++u) fetch(u);
  // Launched with PDL (kernels/common/pdl.cuh): the ring's first stages (weights only) are in
  // flight before the wait; x, the partial sums and y are touched only after it.
  pdl_launch_dependents();
  pdl_wait();

  // A group's zero pair (per n-tile), scales and, in the GGUF form, min terms of the lane's two
  // output columns per n-tile (rows 2t, 2t + 1 and 2t + 8, 2t + 9 of the warp's 16; zeros: the B
  // fragment's rows g and g + 8), read from its slot when the group begins.
  struct GroupScales {
    std::uint32_t zero_pair[2];
    float2 scale[2];
    float2 min_term[2];
  };
  GroupScales cur;
  const auto read_group = [&](const unsigned char* slot) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = 2 * t + 8 * j;
      if constexpr (kGguf) {
        const std::uint32_t z = Q::kBase + static_cast<std::uint32_t>(w.code_zero);
        cur.zero_pair[j] = z | (z << 16);
        const float2 s = __half22float2(*reinterpret_cast<const __half2*>(slot + 2 * r));
        const char2 sc = *reinterpret_cast<const char2*>(slot + 64 + r);
        cur.scale[j] = make_float2(s.x * static_cast<float>(sc.x), s.y * static_cast<float>(sc.y));
        cur.min_term[j] = make_float2(0.0f, 0.0f);
        if (has_min) {
          const float2 b = __half22float2(*reinterpret_cast<const __half2*>(slot + 32 + 2 * r));
          const char2 mc = *reinterpret_cast<const char2*>(slot + 80 + r);
          cur.min_term[j] =
              make_float2(b.x * static_cast<float>(mc.x), b.y * static_cast<float>(mc.y));
        }
      } else {
        const std::uint32_t z = Q::kBase + slot[32 + g + 8 * j];
        cur.zero_pair[j] = z | (z << 16);
        cur.scale[j] = __half22float2(*reinterpret_cast<const __half2*>(slot + 2 * r));
      }
    }
  };

  const auto flush = [&]() {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float s = (e & 1) ? cur.scale[j].y : cur.scale[j].x;
          acc[mt][j][e] += s * part[mt][j][e];
          if constexpr (kGguf) {
            acc[mt][j][e] += ((e & 1) ? cur.min_term[j].y : cur.min_term[j].x) * part_x[mt][e];
          }
          part[mt][j][e] = 0.0f;
        }
      }
    }
    if constexpr (kGguf) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) part_x[mt][e] = 0.0f;
      }
    }
  };
  // The group of the step about to run (not capped: past the last group it names the padding),
  // the step's place in it, and the group of the tile's first step, whose slot is the stage's
  // first.
  int group = cta_begin * kTileCols / group_size;
  int step_in_group = (cta_begin * kTileCols - group * group_size) / 16;
  int tile_group = group;
  bool group_read = false;
  // Before each 16-column step: a group beginning here (or the range's first) reads its slot.
  const auto begin_step = [&](const unsigned char* slots) {
    if (!group_read) {
      read_group(slots + (group - tile_group) * kSlotBytes);
      group_read = true;
    }
  };
  // After each: close the group if it ends here.
  const auto end_step = [&]() {
    if (++step_in_group == steps_per_group) {
      step_in_group = 0;
      flush();
      ++group;
      group_read = false;
    }
  };

  // A fragments of one 16-column step from shared memory.
  using AFragments = std::uint32_t[kMTiles][4];
  const auto load_a = [&](AFragments& a, int c) {  // c: the step's first column within xs
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      a[mt][0] = lo_ok[mt] ? *reinterpret_cast<const std::uint32_t*>(x_lo[mt] + c) : 0u;
      a[mt][1] = hi_ok[mt] ? *reinterpret_cast<const std::uint32_t*>(x_hi[mt] + c) : 0u;
      a[mt][2] = lo_ok[mt] ? *reinterpret_cast<const std::uint32_t*>(x_lo[mt] + c + 8) : 0u;
      a[mt][3] = hi_ok[mt] ? *reinterpret_cast<const std::uint32_t*>(x_hi[mt] + c + 8) : 0u;
    }
  };
  // `hi`: the step's high bits, pair i's at bit kHiBits * i of each 16-bit half.
  const auto step = [&](std::uint32_t word, std::uint32_t hi, const AFragments& a) {
    std::uint32_t b[2][2];
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      std::uint32_t codes = (word >> (4 * pair)) & 0x000F000Fu;
      if constexpr (kHiBits == 1 || kHiBits == 2) {
        constexpr std::uint32_t kMask = kHiBits == 1 ? 0x00010001u : 0x00030003u;
        codes |= ((hi >> (kHiBits * pair)) & kMask) << 4;
      }
      const std::uint32_t lo = Q::sub(codes | Q::kMagic, cur.zero_pair[pair >> 1]);
      if constexpr (kHiBits == 4) {
        const std::uint32_t high =
            Q::sub(((hi >> (4 * pair)) & 0x000F000Fu) | Q::kMagic, Q::kMagic);
        b[pair >> 1][pair & 1] = Q::fma(high, Q::kSixteen, lo);
      } else {
        b[pair >> 1][pair & 1] = lo;
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      mma_16816<T>(part[mt][0], a[mt], b[0][0], b[0][1]);
      mma_16816<T>(part[mt][1], a[mt], b[1][0], b[1][1]);
      if constexpr (kGguf) {
        if (has_min) mma_16816<T>(part_x[mt], a[mt], Q::kOne, Q::kOne);
      }
    }
  };

  // The CTA's K range in chunks whose rows of x fit a buffer. x comes by cp.async, every 16-byte
  // piece in flight at once (a load-then-store loop waited out one L2 latency per 2 KB: 12 of
  // them per chunk at 64 rows), columns past k zero-filled. Past 16 rows, chunks are small (2
  // tiles at 64 rows) and go through two buffers, chunk n + 1 copied while chunk n is used; each
  // copy is one commit group of its own, even when empty, in the same per-thread queue as the
  // ring's, and chunk n's is waited for with at most the newer groups pending: the next chunk's
  // and the ring stages fetched since (capped at kStages, which only ever waits for more than
  // needed). Up to 16 rows a chunk is most of a CTA's range and one buffer does: its copy is
  // waited for at once, with the ring's stages in flight.
  constexpr bool kTwoBuffers = x_buffers(kMTiles) == 2;
  const auto copy_x = [&](int chunk, int buffer) {
    const int tiles_there = min(chunk_tiles, cta_end - chunk);
    const int vectors_per_row = tiles_there * (kTileCols / 8);
    const int col0 = chunk * kTileCols;
    T* to = xs + buffer * x_rows * stride;
    for (int v = static_cast<int>(threadIdx.x); chunk < cta_end && v < rows_here * vectors_per_row;
         v += kThreads) {
      const int r = v / vectors_per_row, c = v - r * vectors_per_row;
      const bool inside = col0 + c * 8 < k;
      cp_async_16(smem_u32(to + r * stride + c * 8),
                  x + static_cast<std::size_t>(row0 + r) * k + (inside ? col0 + c * 8 : 0), inside);
    }
    cp_async_commit();
  };
  if constexpr (kTwoBuffers) copy_x(cta_begin, 0);
  int fetched_since_x = 0;  // ring groups this thread committed after chunk n's copy
  int i = 0;                // the warp's tile within the range
  for (int chunk = cta_begin, n = 0; chunk < cta_end; chunk += chunk_tiles, ++n) {
    const int tiles_here = min(chunk_tiles, cta_end - chunk);
    __syncthreads();  // the buffer the next copy fills is no longer read
    if constexpr (kTwoBuffers) {
      copy_x(chunk + chunk_tiles, (n + 1) % 2);
      cp_async_wait_at_most(min(fetched_since_x + 1, kStages));
    } else {
      copy_x(chunk, 0);
      cp_async_wait<0>();
    }
    fetched_since_x = 0;
    __syncthreads();  // every thread's share of chunk n has landed
    if (count == 0) continue;
    const int x_at = kTwoBuffers ? (n % 2) * x_rows * stride : 0;

    for (int local = 0; local < tiles_here; ++local, ++i) {
      cp_async_wait<kStages - 1>();
      __syncwarp();  // the group slots were copied by other lanes
      const unsigned char* at = ring + stage_at(i);
      const uint4 words = *reinterpret_cast<const uint4*>(at + lane * 16);
      // Each step's high bits, pair i's at bit kHiBits * i (quant/w4a16_layout.h's positions).
      std::uint32_t words_hi[4] = {0, 0, 0, 0};
      if constexpr (kHiBits == 4) {
        const uint4 h = *reinterpret_cast<const uint4*>(at + hi_at);
        words_hi[0] = h.x;
        words_hi[1] = h.y;
        words_hi[2] = h.z;
        words_hi[3] = h.w;
      } else if constexpr (kHiBits == 2) {
        const uint2 h = *reinterpret_cast<const uint2*>(at + hi_at);
        words_hi[0] = h.x;
        words_hi[1] = h.x >> 8;
        words_hi[2] = h.y;
        words_hi[3] = h.y >> 8;
      } else if constexpr (kHiBits == 1) {
        const std::uint32_t h = *reinterpret_cast<const std::uint32_t*>(at + hi_at);
#pragma unroll
        for (int s = 0; s < 4; ++s) words_hi[s] = h >> (4 * s);
      }
      const unsigned char* slots = at + slots_at;
      tile_group = group;
      // With groups of whole tiles a group can begin or end only at the tile's edges, so the
      // bookkeeping runs once per tile instead of once per step (a sixth of the instructions of
      // an M = 1 tile).
      const int c = x_at + local * kTileCols;
      const auto tile_steps = [&](auto per_step) {
        constexpr bool kPerStep = decltype(per_step)::value;
        const auto before = [&](int q) {
          if (kPerStep || q == 0) begin_step(slots);
        };
        const auto after = [&](int q) {
          if constexpr (kPerStep) {
            end_step();
          } else if (q == 3) {
            step_in_group += 3;  // end_step adds the fourth
            end_step();
          }
        };
        // The tile's 4 steps of x loaded up front, so the shared-memory latency is paid once;
        // for 4 x tiles that would take 64 more registers: there, step by step.
        constexpr int kAhead = kMTiles <= 2 ? 4 : 1;
        AFragments a[kAhead];
        if constexpr (kAhead == 4) {
#pragma unroll
          for (int q = 0; q < 4; ++q) load_a(a[q], c + 16 * q);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (kAhead == 1) load_a(a[0], c + 16 * q);
          before(q);
          const std::uint32_t word = q == 0   ? words.x
                                     : q == 1 ? words.y
                                     : q == 2 ? words.z
                                              : words.w;
          step(word, words_hi[q], a[kAhead == 4 ? q : 0]);
          after(q);
        }
      };
      if (whole_tile_groups) {
        tile_steps(std::false_type{});
      } else {
        tile_steps(std::true_type{});
      }
      __syncwarp();  // every lane is done with the stage before it is refilled
      fetch(i + kStages);
      ++fetched_since_x;
    }
  }
  cp_async_wait<0>();
  if (count > 0 && step_in_group != 0) flush();

  // Each warp writes its tile's outputs: y, or this split's partial sums.
  const auto for_each_output = [&](auto&& f) {
    if (!has_tile) return;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + mt * 16 + g + 8 * (e >> 1);
          const int col = col_c + 8 * j + (e & 1);
          if (row < m && col < n) f(acc[mt][j][e], static_cast<std::size_t>(row) * n + col, col);
        }
      }
    }
  };
  if (partial == nullptr) {
    for_each_output([&](float sum, std::size_t at, int col) {
      if (bias != nullptr) sum += to_float(bias[col]);
      store_output<T>(y, y_fp32, at, sum);
    });
    return;
  }
  const std::size_t outputs = static_cast<std::size_t>(m) * n;
  for_each_output([&](float sum, std::size_t at, int) { partial[split * outputs + at] = sum; });
  if (counters == nullptr) return;  // w4a16_reduce_kernel adds the splits

  // The last CTA of these tiles to finish adds the splits in split order (the reduce kernel's
  // order: the same bits) and leaves the counter at zero for the next launch.
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  int* counter = counters + blockIdx.z * gridDim.x + blockIdx.x;
  if (threadIdx.x == 0) last = atomicAdd(counter, 1) == static_cast<int>(gridDim.y) - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for_each_output([&](float, std::size_t at, int col) {
    float sum = __ldcg(partial + at);
    for (int sp = 1; sp < static_cast<int>(gridDim.y); ++sp)
      sum += __ldcg(partial + sp * outputs + at);
    if (bias != nullptr) sum += to_float(bias[col]);
    store_output<T>(y, y_fp32, at, sum);
  });
  if (threadIdx.x == 0) *counter = 0;
}

// y = the K splits' partial sums added in split order, + bias, rounded once.
template <typename T>
__global__ void w4a16_reduce_kernel(const float* __restrict__ partial, int splits,
                                    const T* __restrict__ bias, void* __restrict__ y, bool y_fp32,
                                    int m, int n) {
  pdl_launch_dependents();
  pdl_wait();  // the partial sums are the kernel before's
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t outputs = static_cast<std::size_t>(m) * n;
  if (i >= outputs) return;
  float sum = partial[i];
  for (int s = 1; s < splits; ++s) sum += partial[static_cast<std::size_t>(s) * outputs + i];
  if (bias != nullptr) sum += to_float(bias[i % n]);
  store_output<T>(y, y_fp32, i, sum);
}

template <typename T, int kMTiles, Form kForm>
Status launch_tiles(const W4A16GemmParams& p, const Plan& plan, float* partial, int* counters,
                    cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in, once per process.
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      w4a16_gemm_kernel<T, kMTiles, kForm>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      x_buffers(kMTiles) * (x_buffer_bytes(kMTiles) + kXPad * 2 * 64) + ring_bytes(kForm, 16));
  PAGODA_CUDA_RETURN_IF_ERROR(opt_in);
  const KernelWeights w{.packed = reinterpret_cast<const uint4*>(p.w.packed),
                        .packed_hi = p.w.packed_hi,
                        .scales = reinterpret_cast<const __half*>(p.w.scales),
                        .zeros = p.w.zeros,
                        .scale_codes = p.w.scale_codes,
                        .mins = reinterpret_cast<const __half*>(p.w.mins),
                        .min_codes = p.w.min_codes,
                        .super_shift = p.w.super_shift,
                        .code_zero = p.w.code_zero};
  const dim3 grid((plan.n_tiles + kWarps - 1) / kWarps, plan.splits, plan.m_blocks);
  return launch_pdl(w4a16_gemm_kernel<T, kMTiles, kForm>, grid, dim3(kThreads), smem_bytes(plan),
                    stream, "w4a16_gemm_kernel", static_cast<const T*>(p.x), w,
                    static_cast<const T*>(p.bias), p.y, p.y_fp32, partial, static_cast<int>(p.m),
                    static_cast<int>(p.w.rows), static_cast<int>(p.w.cols), plan.k_tiles,
                    plan.n_tiles * kTileRows, static_cast<int>(p.w.group_size),
                    static_cast<int>((p.w.cols + p.w.group_size - 1) / p.w.group_size),
                    plan.tiles_per_split, plan.chunk_tiles, counters);
}

template <typename T, Form kForm>
Status launch_form(const W4A16GemmParams& p, const Plan& plan, float* partial, int* counters,
                   cudaStream_t stream) {
  return plan.m_tiles == 1   ? launch_tiles<T, 1, kForm>(p, plan, partial, counters, stream)
         : plan.m_tiles == 2 ? launch_tiles<T, 2, kForm>(p, plan, partial, counters, stream)
                             : launch_tiles<T, 4, kForm>(p, plan, partial, counters, stream);
}

template <typename T>
Status launch_any_form(const W4A16GemmParams& p, const Plan& plan, float* partial, int* counters,
                       cudaStream_t stream) {
  switch (plan.form) {
    case Form::kGguf4: return launch_form<T, Form::kGguf4>(p, plan, partial, counters, stream);
    case Form::kGguf5: return launch_form<T, Form::kGguf5>(p, plan, partial, counters, stream);
    case Form::kGguf6: return launch_form<T, Form::kGguf6>(p, plan, partial, counters, stream);
    case Form::kGguf8: return launch_form<T, Form::kGguf8>(p, plan, partial, counters, stream);
    case Form::kZeroPoint: break;
  }
  return launch_form<T, Form::kZeroPoint>(p, plan, partial, counters, stream);
}

template <typename T>
Status launch_typed(const W4A16GemmParams& p, cudaStream_t stream) {
  Plan plan = plan_for(p.m, p.w.rows, p.w.cols, form_of(p.w), p.w.group_size);
  if (partial_bytes(plan, p.m, p.w.rows) > p.workspace_bytes || p.workspace == nullptr) {
    const std::size_t per_split = static_cast<std::size_t>(p.m) * p.w.rows * sizeof(float);
    const auto fits = p.workspace == nullptr ? 0 : static_cast<int>(p.workspace_bytes / per_split);
    set_splits(plan, fits >= 2 ? std::min(fits, plan.splits) : 1);
  }
  float* partial = plan.splits > 1 ? p.workspace : nullptr;
  const std::int64_t counters_needed =
      static_cast<std::int64_t>((plan.n_tiles + kWarps - 1) / kWarps) * plan.m_blocks;
  int* counters = partial != nullptr && p.counters != nullptr && p.counters_count >= counters_needed
                      ? p.counters
                      : nullptr;
  PAGODA_RETURN_IF_ERROR(launch_any_form<T>(p, plan, partial, counters, stream));
  if (partial == nullptr || counters != nullptr) return Status::ok_status();
  const std::size_t outputs = static_cast<std::size_t>(p.m) * p.w.rows;
  const auto blocks = static_cast<unsigned>((outputs + 255) / 256);
  return launch_pdl(w4a16_reduce_kernel<T>, dim3(blocks), dim3(256), 0, stream,
                    "w4a16_reduce_kernel", static_cast<const float*>(partial), plan.splits,
                    static_cast<const T*>(p.bias), p.y, p.y_fp32, static_cast<int>(p.m),
                    static_cast<int>(p.w.rows));
}

bool is_16_bit(cuda::ScalarType t) {
  return t == cuda::ScalarType::kBF16 || t == cuda::ScalarType::kF16;
}

}  // namespace

bool w4a16_gemm_applies(const W4A16GemmParams& p) {
  const auto aligned = [](const void* ptr, std::uintptr_t to) {
    return reinterpret_cast<std::uintptr_t>(ptr) % to == 0;
  };
  // The group metadata arrays are copied 16 bytes at a time.
  const bool groups_ok =
      p.w.scale_codes == nullptr
          ? p.w.group_size >= 32 && p.w.group_size % 32 == 0 && aligned(p.w.zeros, 16)
          : (p.w.group_size == 16 || p.w.group_size == 32) && aligned(p.w.scale_codes, 16) &&
                aligned(p.w.mins, 16) && aligned(p.w.min_codes, 16) && aligned(p.w.packed_hi, 16) &&
                (p.w.hi_bits == 0 || p.w.hi_bits == 1 || p.w.hi_bits == 2 || p.w.hi_bits == 4) &&
                (p.w.hi_bits == 0) == (p.w.packed_hi == nullptr) &&
                (p.w.mins == nullptr) == (p.w.min_codes == nullptr);
  return is_16_bit(p.dtype) && p.m >= 1 && p.w.rows >= 1 && p.w.cols >= 32 && p.w.cols % 32 == 0 &&
         groups_ok && p.m <= (1 << 24) && p.w.rows <= (1 << 24) && p.w.cols <= (1 << 24) &&
         aligned(p.x, 16) && aligned(p.w.packed, 16) && aligned(p.w.scales, 16) && p.y != nullptr;
}

Status launch_w4a16_gemm(const W4A16GemmParams& p, cudaStream_t stream) {
  if (!w4a16_gemm_applies(p)) {
    return invalid_argument("w4a16 gemm: unsupported shape, dtype or alignment (m " +
                            std::to_string(p.m) + ", " + std::to_string(p.w.rows) + " x " +
                            std::to_string(p.w.cols) + ", group " + std::to_string(p.w.group_size) +
                            ")");
  }
  return p.dtype == cuda::ScalarType::kBF16 ? launch_typed<__nv_bfloat16>(p, stream)
                                            : launch_typed<__half>(p, stream);
}

}  // namespace pagoda::kernels
