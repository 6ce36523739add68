// The prefill tile of prefill_attention.h, written once over an ISA's vector type. Include only
// from prefill_attention_avx2.cc and prefill_attention_avx512.cc: everything here has internal
// linkage and is compiled with that file's flags.
//
// An Isa struct provides the vector type and its operations:
//   Vec, kLanes; kRowVecs (rows per tile = kRowVecs x kLanes); kScoreKeys (keys per score
//   micro-kernel); kValueRows x kValueVecs (rows x vectors of head dims per value micro-kernel);
//   kKeyBlock (keys per softmax update);
//   load, store, set1, zero, fmadd(a, b, c) = a*b + c, mul, sub, max, exp;
//   hide_after(s, pos, key): lanes whose position pos[lane] < key become -inf;
//   zero_hidden(p, s): lanes where s is -inf become 0;
//   widen(src, n, dst): n fp16 values to fp32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cpu/prefill_attention.h"

namespace pagoda::cpu {
namespace {

// Stands in for keys past a block's last one, so the score micro-kernel always runs whole.
alignas(64) constexpr float kZeroKey[kPrefillMaxHeadDim] = {};

template <typename Isa>
struct PrefillKernel {
  using Vec = typename Isa::Vec;
  static constexpr int kLanes = Isa::kLanes;
  static constexpr int kVecs = Isa::kRowVecs;
  static constexpr int kRows = kLanes * kVecs;
  static constexpr int kKeyBlock = Isa::kKeyBlock;
  static constexpr int kScoreKeys = Isa::kScoreKeys;
  static constexpr int kValueRows = Isa::kValueRows;
  static constexpr int kValueVecs = Isa::kValueVecs;
  static_assert(kRows % kValueRows == 0, "value micro-kernels cover the tile's rows");
  // Score rows a block may write: its keys rounded up to whole micro-kernels.
  static constexpr int kScoreRows = kKeyBlock + kScoreKeys - 1;

  //   scratch (64-byte aligned): qt [D, kRows] | o [kRows, D] | st [kScoreRows, kRows]
  //                              | widened fp16 K [kKeyBlock, D] | widened fp16 V [kKeyBlock, D]
  static std::int64_t scratch_floats(std::int64_t head_dim) {
    return 16 + 2 * head_dim * kRows + kScoreRows * kRows + 2 * kKeyBlock * head_dim;
  }

  // st[j, :] = sum over d of keys[j][d] * qt[d, :] for the kScoreKeys keys key0 + j: each key
  // element is broadcast once and multiplies all kRows rows, and the sum over d runs in order in
  // every lane. Keys from index masked_from on are hidden (-inf) from the lanes they follow;
  // block_max takes the maximum of what is stored.
  static void score_keys(const float* qt, const float* const* keys, std::int64_t head_dim,
                         std::int64_t key0, std::int64_t masked_from, const std::int32_t* position,
                         float* st, Vec* block_max) {
    Vec acc[kScoreKeys][kVecs];
#pragma GCC unroll 8
    for (int j = 0; j < kScoreKeys; ++j) {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) acc[j][v] = Isa::zero();
    }
    for (std::int64_t d = 0; d < head_dim; ++d) {
      Vec q[kVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) q[v] = Isa::load(qt + d * kRows + v * kLanes);
#pragma GCC unroll 8
      for (int j = 0; j < kScoreKeys; ++j) {
        const Vec k = Isa::set1(keys[j][d]);
#pragma GCC unroll 4
        for (int v = 0; v < kVecs; ++v) acc[j][v] = Isa::fmadd(k, q[v], acc[j][v]);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < kScoreKeys; ++j) {
#pragma GCC unroll 4
      for (int v = 0; v < kVecs; ++v) {
        if (j >= masked_from)
          acc[j][v] = Isa::hide_after(acc[j][v], position + v * kLanes, key0 + j);
        block_max[v] = Isa::max(block_max[v], acc[j][v]);
        Isa::store(st + j * kRows + v * kLanes, acc[j][v]);
      }
    }
  }

  // o[r0 + i, d0 : d0 + kDVecs*kLanes] = correction[r0 + i] * o + sum over j < count of
  // st[j, r0 + i] * values[j][same dims], for i < kValueRows: each value vector is loaded once
  // for kValueRows rows, and the sum over keys runs in order.
  template <int kDVecs>
  static void accumulate_values(float* o, std::int64_t head_dim, std::int64_t r0, std::int64_t d0,
                                const float* const* values, std::int64_t count, const float* st,
                                const float* correction) {
    Vec acc[kValueRows][kDVecs];
#pragma GCC unroll 8
    for (int i = 0; i < kValueRows; ++i) {
      const Vec c = Isa::set1(correction[r0 + i]);
#pragma GCC unroll 4
      for (int v = 0; v < kDVecs; ++v) {
        acc[i][v] = Isa::mul(Isa::load(o + (r0 + i) * head_dim + d0 + v * kLanes), c);
      }
    }
    for (std::int64_t j = 0; j < count; ++j) {
      Vec x[kDVecs];
#pragma GCC unroll 4
      for (int v = 0; v < kDVecs; ++v) x[v] = Isa::load(values[j] + d0 + v * kLanes);
      const float* p = st + j * kRows + r0;
#pragma GCC unroll 8
      for (int i = 0; i < kValueRows; ++i) {
        const Vec pi = Isa::set1(p[i]);
#pragma GCC unroll 4
        for (int v = 0; v < kDVecs; ++v) acc[i][v] = Isa::fmadd(pi, x[v], acc[i][v]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kValueRows; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < kDVecs; ++v)
        Isa::store(o + (r0 + i) * head_dim + d0 + v * kLanes, acc[i][v]);
    }
  }

  // keys[j], values[j]: K and V rows of positions key0 + j, j < count, walking the block table;
  // with an fp16 cache, fp32 copies in `widened`.
  static void gather(const PrefillTile& tile, std::int64_t key0, std::int64_t count, float* widened,
                     const float** keys, const float** values) {
    const std::int64_t head_dim = tile.head_dim;
    std::int64_t block = key0 / tile.block_size;
    std::int64_t offset = key0 % tile.block_size;
    std::int64_t base = static_cast<std::int64_t>(tile.block_table[block]) * tile.block_size;
    for (std::int64_t j = 0; j < count; ++j) {
      const std::int64_t at = (base + offset) * tile.slot_stride;
      if (tile.k_f16 != nullptr) {
        float* key = widened + j * head_dim;
        float* value = widened + (kKeyBlock + j) * head_dim;
        Isa::widen(tile.k_f16 + at, head_dim, key);
        Isa::widen(tile.v_f16 + at, head_dim, value);
        keys[j] = key;
        values[j] = value;
      } else {
        keys[j] = tile.k + at;
        values[j] = tile.v + at;
      }
      if (++offset == tile.block_size && j + 1 < count) {
        offset = 0;
        base = static_cast<std::int64_t>(tile.block_table[++block]) * tile.block_size;
      }
    }
  }

  // Per lane (row) the state of an online softmax over the key blocks seen so far: running max
  // m, running sum l of exp(s - m), and o = sum of exp(s - m) * v, rescaled by exp(m - m') when
  // a block raises the max to m'. Lanes past num_rows repeat the last row's position with a zero
  // query (finite, never written out).
  static void run(const PrefillTile& tile) {
    const std::int64_t head_dim = tile.head_dim;
    const std::int64_t group = tile.group_size;
    auto* base = reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(tile.scratch) + 63) &
                                          ~std::uintptr_t{63});
    float* qt = base;
    float* o = qt + head_dim * kRows;
    float* st = o + kRows * head_dim;
    float* widened = st + kScoreRows * kRows;

    alignas(64) std::int32_t position[kRows];
    for (int r = 0; r < kRows; ++r) {
      const std::int64_t row = tile.first_row + std::min<std::int64_t>(r, tile.num_rows - 1);
      position[r] = static_cast<std::int32_t>(tile.first_position + row / group);
    }
    // Q^T with the softmax scale folded in; o = 0.
    for (int r = 0; r < kRows; ++r) {
      if (r < tile.num_rows) {
        const std::int64_t row = tile.first_row + r;
        const float* q = tile.q + (row / group) * tile.token_stride + (row % group) * head_dim;
        for (std::int64_t d = 0; d < head_dim; ++d) qt[d * kRows + r] = q[d] * tile.scale;
      } else {
        for (std::int64_t d = 0; d < head_dim; ++d) qt[d * kRows + r] = 0.0f;
      }
    }
    std::fill(o, o + kRows * head_dim, 0.0f);
    Vec m[kVecs];
    Vec l[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      m[v] = Isa::set1(-INFINITY);
      l[v] = Isa::zero();
    }
    alignas(64) float correction[kRows];

    const std::int64_t first = position[0];
    const std::int64_t last = position[kRows - 1];
    const float* keys[kScoreRows];
    const float* values[kKeyBlock];
    for (std::int64_t key0 = 0; key0 <= last; key0 += kKeyBlock) {
      const std::int64_t count = std::min<std::int64_t>(kKeyBlock, last + 1 - key0);
      gather(tile, key0, count, widened, keys, values);
      const std::int64_t padded = (count + kScoreKeys - 1) / kScoreKeys * kScoreKeys;
      for (std::int64_t j = count; j < padded; ++j) keys[j] = kZeroKey;
      // Keys past the first row's position are hidden from the rows before them (causal), and
      // the zero keys past count from every row.
      const std::int64_t masked_from = std::max<std::int64_t>(0, first + 1 - key0);
      Vec block_max[kVecs];
      for (int v = 0; v < kVecs; ++v) block_max[v] = Isa::set1(-INFINITY);
      for (std::int64_t j = 0; j < padded; j += kScoreKeys) {
        score_keys(qt, keys + j, head_dim, key0 + j, masked_from - j, position, st + j * kRows,
                   block_max);
      }
      Vec sum[kVecs];
      for (int v = 0; v < kVecs; ++v) {
        const Vec new_max = Isa::max(m[v], block_max[v]);
        const Vec c = Isa::exp(Isa::sub(m[v], new_max));
        Isa::store(correction + v * kLanes, c);
        l[v] = Isa::mul(l[v], c);
        m[v] = new_max;
        sum[v] = Isa::zero();
      }
      for (std::int64_t j = 0; j < count; ++j) {
        for (int v = 0; v < kVecs; ++v) {
          float* s = st + j * kRows + v * kLanes;
          const Vec sv = Isa::load(s);
          Vec p = Isa::exp(Isa::sub(sv, m[v]));
          // exp floors at 2^-126: a hidden key must weigh exactly 0.
          if (j >= masked_from) p = Isa::zero_hidden(p, sv);
          sum[v] = Isa::add(sum[v], p);
          Isa::store(s, p);
        }
      }
      for (int v = 0; v < kVecs; ++v) l[v] = Isa::add(l[v], sum[v]);
      const std::int64_t rows = std::min<std::int64_t>(tile.num_rows, kRows);
      for (std::int64_t r0 = 0; r0 < rows; r0 += kValueRows) {
        for (std::int64_t d0 = 0; d0 < head_dim; d0 += kValueVecs * kLanes) {
          switch (std::min<std::int64_t>(kValueVecs, (head_dim - d0) / kLanes)) {
            case 1: accumulate_values<1>(o, head_dim, r0, d0, values, count, st, correction); break;
            case 2: accumulate_values<2>(o, head_dim, r0, d0, values, count, st, correction); break;
            case 3: accumulate_values<3>(o, head_dim, r0, d0, values, count, st, correction); break;
            default:
              accumulate_values<kValueVecs>(o, head_dim, r0, d0, values, count, st, correction);
              break;
          }
        }
      }
    }
    alignas(64) float sums[kRows];
    for (int v = 0; v < kVecs; ++v) Isa::store(sums + v * kLanes, l[v]);
    for (std::int64_t r = 0; r < tile.num_rows; ++r) {
      const std::int64_t row = tile.first_row + r;
      float* out = tile.out + (row / group) * tile.token_stride + (row % group) * head_dim;
      const Vec inv = Isa::set1(1.0f / sums[r]);
      for (std::int64_t d = 0; d < head_dim; d += kLanes) {
        Isa::store(out + d, Isa::mul(Isa::load(o + r * head_dim + d), inv));
      }
    }
  }
};

}  // namespace
}  // namespace pagoda::cpu
