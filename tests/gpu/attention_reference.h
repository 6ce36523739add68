// The attention tests' oracle (attention_test_batch.h uploads it; the tests run on hardware and on
// the CPU emulation): a random batch of sequences over a paged KV cache with shuffled block
// tables, in both pool layouts (CPU [block, offset, kv_head, d], GPU [block, kv_head, offset, d]),
// and the CPU oracle's answer (cpu::paged_attention_reference, in double).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/windowed_attention.h"
#include "backend/cuda/scalar_type.h"
#include "kernels/attention/paged_attention.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::gpu_test {

using cuda::ScalarType;

struct Sequence {
  std::int32_t q_len;
  std::int32_t seq_len;
};

struct AttentionCase {
  std::vector<Sequence> seqs;
  std::int64_t head_dim;
  std::int64_t num_heads;
  std::int64_t num_kv_heads;
  std::int64_t block_size;
  std::int64_t sliding_window = 0;  ///< 0: full causal context (Gemma 3's local layers: > 0)
  float logit_softcap = 0.0f;       ///< 0: none; else scores = cap * tanh(scores / cap)
};

inline std::string describe(const AttentionCase& c, ScalarType type) {
  std::string s =
      std::string(gpu_test::name_of(type)) + " d" + std::to_string(c.head_dim) + " heads " +
      std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads) + " page " +
      std::to_string(c.block_size) + " window " + std::to_string(c.sliding_window) +
      (c.logit_softcap != 0.0f ? " softcap " + std::to_string(c.logit_softcap) : "") + " seqs";
  for (const Sequence& q : c.seqs) {
    s += " (" + std::to_string(q.q_len) + "/" + std::to_string(q.seq_len) + ")";
  }
  return s;
}

/// Per-tensor scales of an FP8 cache (kernels::KvCacheStorage::kFp8E4M3).
struct Fp8Scales {
  float k = 1.0f;
  float v = 1.0f;
};

/// Where a batch's arrays live for the kernels (device memory, or host memory under the CPU
/// emulation).
struct AttentionArrays {
  const void* q = nullptr;  ///< [num_tokens, q_row_stride]
  void* out = nullptr;      ///< [num_tokens, num_heads, head_dim]
  const void* k = nullptr;  ///< the GPU layout: gpu_k (T) or gpu_k_codes (FP8)
  const void* v = nullptr;
  const std::int32_t* query_start_loc = nullptr;
  const std::int32_t* seq_lens = nullptr;
  const std::int32_t* block_tables = nullptr;
};

// One random batch and cache and the oracle's answer, all on the host. `row_pad` extra elements
// per q row test a q_row_stride that is not num_heads * head_dim. With `fp8`, the kernels' cache
// holds e4m3(x / scale) codes (the host's rounding rule, the RoPE/append kernel's) and the oracle
// sees code * scale.
class HostAttentionBatch {
 public:
  HostAttentionBatch(const AttentionCase& c, ScalarType type, std::mt19937& rng,
                     std::int64_t row_pad = 0, std::optional<Fp8Scales> fp8 = std::nullopt)
      : c_(c), type_(type), q_row_stride_(c.num_heads * c.head_dim + row_pad), fp8_(fp8) {
    const std::int64_t d = c.head_dim;
    query_start_loc_.push_back(0);
    std::int64_t max_blocks = 1, total_blocks = 0;
    for (const Sequence& s : c.seqs) {
      query_start_loc_.push_back(query_start_loc_.back() + s.q_len);
      seq_lens_.push_back(s.seq_len);
      const std::int64_t blocks = (s.seq_len + c.block_size - 1) / c.block_size;
      max_blocks = std::max(max_blocks, blocks);
      total_blocks += blocks;
      max_query_len_ = std::max<std::int64_t>(max_query_len_, s.q_len);
      max_seq_len_ = std::max<std::int64_t>(max_seq_len_, s.seq_len);
    }
    num_tokens_ = query_start_loc_.back();
    max_blocks_ = max_blocks;
    num_blocks_ = total_blocks + 3;  // a few blocks nobody owns
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks_));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    block_tables_.assign(c.seqs.size() * max_blocks_, -1);
    std::size_t next = 0;
    for (std::size_t s = 0; s < c.seqs.size(); ++s) {
      const std::int64_t blocks = (c.seqs[s].seq_len + c.block_size - 1) / c.block_size;
      for (std::int64_t b = 0; b < blocks; ++b) block_tables_[s * max_blocks_ + b] = ids[next++];
    }

    const auto cache_elems =
        static_cast<std::size_t>(num_blocks_ * c.block_size * c.num_kv_heads * d);
    std::vector<float> cpu_k = gpu_test::round_to(gpu_test::random_vector(cache_elems, rng), type);
    std::vector<float> cpu_v = gpu_test::round_to(gpu_test::random_vector(cache_elems, rng), type);
    std::vector<std::uint8_t> k_codes, v_codes;  // FP8: in the CPU layout, then the GPU's
    if (fp8_) {
      const auto quantize = [](std::vector<float>& values, float scale,
                               std::vector<std::uint8_t>& codes) {
        codes.resize(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
          codes[i] = quant::float_to_fp8_e4m3(values[i] / scale);
          values[i] = fp8_e4m3_to_float(codes[i]) * scale;
        }
      };
      quantize(cpu_k, fp8_->k, k_codes);
      quantize(cpu_v, fp8_->v, v_codes);
    }
    gpu_k_codes_.resize(k_codes.size());
    gpu_v_codes_.resize(v_codes.size());
    gpu_k_.resize(cache_elems);
    gpu_v_.resize(cache_elems);
    for (std::int64_t b = 0; b < num_blocks_; ++b) {
      for (std::int64_t o = 0; o < c.block_size; ++o) {
        for (std::int64_t h = 0; h < c.num_kv_heads; ++h) {
          const auto from =
              static_cast<std::size_t>(((b * c.block_size + o) * c.num_kv_heads + h) * d);
          const auto to =
              static_cast<std::size_t>(((b * c.num_kv_heads + h) * c.block_size + o) * d);
          std::copy_n(cpu_k.begin() + from, d, gpu_k_.begin() + to);
          std::copy_n(cpu_v.begin() + from, d, gpu_v_.begin() + to);
          if (fp8_) {
            std::copy_n(k_codes.begin() + from, d, gpu_k_codes_.begin() + to);
            std::copy_n(v_codes.begin() + from, d, gpu_v_codes_.begin() + to);
          }
        }
      }
    }
    // q uniform(-4, 4) against K in (-1, 1): a peaked softmax, so a wrong mask or block shows.
    scale_ = 1.0f / std::sqrt(static_cast<float>(d));
    const std::int64_t q_elems = num_tokens_ * c.num_heads * d;
    q_ = gpu_test::round_to(
        gpu_test::random_vector(static_cast<std::size_t>(q_elems), rng, -4.0f, 4.0f), type);
    want_.resize(q_.size());
    const cpu::KvCacheView view{.k = cpu_k.data(),
                                .v = cpu_v.data(),
                                .num_blocks = num_blocks_,
                                .block_size = c.block_size,
                                .num_kv_heads = c.num_kv_heads,
                                .head_dim = d};
    const cpu::AttentionBatch batch{.query_start_loc = query_start_loc_.data(),
                                    .seq_lens = seq_lens_.data(),
                                    .block_tables = block_tables_.data(),
                                    .num_seqs = static_cast<std::int64_t>(c.seqs.size()),
                                    .max_blocks_per_seq = max_blocks_};
    if (c.sliding_window > 0 || c.logit_softcap != 0.0f) {
      cpu::windowed_attention_reference(
          q_.data(), c.num_heads, view, batch,
          {.scale = scale_, .sliding_window = c.sliding_window, .logit_softcap = c.logit_softcap},
          want_.data());
    } else {
      cpu::paged_attention_reference(q_.data(), c.num_heads, view, batch, want_.data());
    }

    // The kernels' q rows carry row_pad random (never read) elements after the heads.
    q_padded_.resize(static_cast<std::size_t>(num_tokens_ * q_row_stride_));
    const std::vector<float> pad = gpu_test::random_vector(q_padded_.size(), rng);
    for (std::int64_t t = 0; t < num_tokens_; ++t) {
      const std::int64_t row = c.num_heads * d;
      std::copy_n(q_.begin() + t * row, row, q_padded_.begin() + t * q_row_stride_);
      std::copy_n(pad.begin() + t * q_row_stride_ + row, row_pad,
                  q_padded_.begin() + t * q_row_stride_ + row);
    }
  }

  /// The kernels' parameters over this batch's arrays, wherever they live.
  kernels::PagedAttentionParams params(const AttentionArrays& a) const {
    return {.q = a.q,
            .q_row_stride = q_row_stride_,
            .out = a.out,
            .cache = {.k = const_cast<void*>(a.k),
                      .v = const_cast<void*>(a.v),
                      .num_blocks = num_blocks_,
                      .block_size = c_.block_size,
                      .num_kv_heads = c_.num_kv_heads,
                      .head_dim = c_.head_dim,
                      .storage = fp8_ ? kernels::KvCacheStorage::kFp8E4M3
                                      : kernels::KvCacheStorage::kActivations,
                      .k_scale = fp8_ ? fp8_->k : 1.0f,
                      .v_scale = fp8_ ? fp8_->v : 1.0f},
            .query_start_loc = a.query_start_loc,
            .seq_lens = a.seq_lens,
            .block_tables = a.block_tables,
            .num_seqs = static_cast<std::int64_t>(c_.seqs.size()),
            .max_blocks_per_seq = max_blocks_,
            .num_heads = c_.num_heads,
            .softmax_scale = scale_,
            .sliding_window = c_.sliding_window,
            .logit_softcap = c_.logit_softcap,
            .dtype = type_};
  }

  /// The worst per-sequence relative L2 error of `got` against `want`; NaN/inf fail the test.
  double worst_error(const std::vector<float>& got, const std::vector<float>& want,
                     const std::string& what) const {
    double worst = 0.0;
    const std::int64_t row = c_.num_heads * c_.head_dim;
    for (std::size_t s = 0; s < c_.seqs.size(); ++s) {
      const auto begin = static_cast<std::size_t>(query_start_loc_[s] * row);
      const auto end = static_cast<std::size_t>(query_start_loc_[s + 1] * row);
      const gpu_test::Comparison c = gpu_test::compare({got.begin() + begin, got.begin() + end},
                                                       {want.begin() + begin, want.begin() + end});
      EXPECT_EQ(c.num_nan, 0u) << what << " seq " << s << ": elements not written or not finite";
      worst = std::max(worst, c.relative_l2);
    }
    return worst;
  }

  const AttentionCase& attention_case() const { return c_; }
  ScalarType type() const { return type_; }
  bool fp8() const { return fp8_.has_value(); }
  const std::vector<float>& want() const { return want_; }
  std::int64_t max_seq_len() const { return max_seq_len_; }
  std::int64_t max_query_len() const { return max_query_len_; }
  /// The kernels' inputs: q rows of q_row_stride, the cache in the GPU layout (values of the
  /// dtype, or e4m3 codes with fp8), the step metadata.
  const std::vector<float>& q_padded() const { return q_padded_; }
  const std::vector<float>& gpu_k() const { return gpu_k_; }
  const std::vector<float>& gpu_v() const { return gpu_v_; }
  const std::vector<std::uint8_t>& gpu_k_codes() const { return gpu_k_codes_; }
  const std::vector<std::uint8_t>& gpu_v_codes() const { return gpu_v_codes_; }
  const std::vector<std::int32_t>& query_start_loc() const { return query_start_loc_; }
  const std::vector<std::int32_t>& seq_lens() const { return seq_lens_; }
  const std::vector<std::int32_t>& block_tables() const { return block_tables_; }

 private:
  AttentionCase c_;
  ScalarType type_;
  std::int64_t q_row_stride_;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_tables_;
  std::int64_t num_tokens_ = 0, max_blocks_ = 0, num_blocks_ = 0, max_query_len_ = 0;
  std::int64_t max_seq_len_ = 0;
  std::vector<float> q_, q_padded_, want_;
  std::vector<float> gpu_k_, gpu_v_;                     // what the oracle reads
  std::vector<std::uint8_t> gpu_k_codes_, gpu_v_codes_;  // FP8 only
  float scale_ = 0.0f;
  std::optional<Fp8Scales> fp8_;
};

}  // namespace pagoda::gpu_test
