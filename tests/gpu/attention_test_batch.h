// The attention tests' shared input: a random batch of sequences over a paged KV cache with
// shuffled block tables, in both pool layouts (CPU [block, offset, kv_head, d], GPU [block,
// kv_head, offset, d]), the CPU oracle's answer (cpu::paged_attention_reference, in double), and
// runs of the prefill and decode kernels on it with NaN-poisoned outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/paged_attention.h"
#include "backend/cpu/windowed_attention.h"
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

// One random batch and cache, the oracle's answer, and runs of the prefill (any PrefillKernel)
// and decode kernels on it. `row_pad` extra elements per q row test a q_row_stride that is not
// num_heads * head_dim. With `fp8`, the device cache holds e4m3(x / scale) codes (the host's
// rounding rule, the RoPE/append kernel's) and the oracle sees code * scale.
class AttentionBatch {
 public:
  AttentionBatch(const AttentionCase& c, ScalarType type, std::mt19937& rng,
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
    std::vector<std::uint8_t> gpu_k_codes(k_codes.size()), gpu_v_codes(v_codes.size());
    std::vector<float> gpu_k(cache_elems), gpu_v(cache_elems);
    for (std::int64_t b = 0; b < num_blocks_; ++b) {
      for (std::int64_t o = 0; o < c.block_size; ++o) {
        for (std::int64_t h = 0; h < c.num_kv_heads; ++h) {
          const auto from =
              static_cast<std::size_t>(((b * c.block_size + o) * c.num_kv_heads + h) * d);
          const auto to =
              static_cast<std::size_t>(((b * c.num_kv_heads + h) * c.block_size + o) * d);
          std::copy_n(cpu_k.begin() + from, d, gpu_k.begin() + to);
          std::copy_n(cpu_v.begin() + from, d, gpu_v.begin() + to);
          if (fp8_) {
            std::copy_n(k_codes.begin() + from, d, gpu_k_codes.begin() + to);
            std::copy_n(v_codes.begin() + from, d, gpu_v_codes.begin() + to);
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

    // The device q rows carry row_pad random (never read) elements after the heads.
    std::vector<float> q_padded(static_cast<std::size_t>(num_tokens_ * q_row_stride_));
    const std::vector<float> pad = gpu_test::random_vector(q_padded.size(), rng);
    for (std::int64_t t = 0; t < num_tokens_; ++t) {
      const std::int64_t row = c.num_heads * d;
      std::copy_n(q_.begin() + t * row, row, q_padded.begin() + t * q_row_stride_);
      std::copy_n(pad.begin() + t * q_row_stride_ + row, row_pad,
                  q_padded.begin() + t * q_row_stride_ + row);
    }
    d_q_ = std::make_unique<DeviceArray>(q_padded, type);
    if (fp8_) {
      d_k_codes_ = std::make_unique<DeviceVector<std::uint8_t>>(gpu_k_codes);
      d_v_codes_ = std::make_unique<DeviceVector<std::uint8_t>>(gpu_v_codes);
    } else {
      d_k_ = std::make_unique<DeviceArray>(gpu_k, type);
      d_v_ = std::make_unique<DeviceArray>(gpu_v, type);
    }
    d_out_ = std::make_unique<DeviceArray>(want_.size(), type);
    d_qsl_ = std::make_unique<DeviceVector<std::int32_t>>(query_start_loc_);
    d_seq_lens_ = std::make_unique<DeviceVector<std::int32_t>>(seq_lens_);
    d_tables_ = std::make_unique<DeviceVector<std::int32_t>>(block_tables_);
  }

  /// The kernels' parameters over this batch's device arrays.
  kernels::PagedAttentionParams params() const {
    return {.q = d_q_->data(),
            .q_row_stride = q_row_stride_,
            .out = d_out_->data(),
            .cache = {.k = fp8_ ? static_cast<void*>(d_k_codes_->data()) : d_k_->data(),
                      .v = fp8_ ? static_cast<void*>(d_v_codes_->data()) : d_v_->data(),
                      .num_blocks = num_blocks_,
                      .block_size = c_.block_size,
                      .num_kv_heads = c_.num_kv_heads,
                      .head_dim = c_.head_dim,
                      .storage = fp8_ ? kernels::KvCacheStorage::kFp8E4M3
                                      : kernels::KvCacheStorage::kActivations,
                      .k_scale = fp8_ ? fp8_->k : 1.0f,
                      .v_scale = fp8_ ? fp8_->v : 1.0f},
            .query_start_loc = d_qsl_->data(),
            .seq_lens = d_seq_lens_->data(),
            .block_tables = d_tables_->data(),
            .num_seqs = static_cast<std::int64_t>(c_.seqs.size()),
            .max_blocks_per_seq = max_blocks_,
            .num_heads = c_.num_heads,
            .softmax_scale = scale_,
            .sliding_window = c_.sliding_window,
            .logit_softcap = c_.logit_softcap,
            .dtype = type_};
  }

  /// Poisons the output, runs the prefill `kernel`, returns its status and (when ok) the output.
  Status run_prefill(kernels::PrefillKernel kernel, std::vector<float>* out) {
    d_out_->poison();
    const Status s =
        kernels::launch_paged_prefill_attention(params(), max_query_len_, kernel, nullptr);
    if (!s.ok()) return s;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *out = d_out_->download();
    return s;
  }

  /// Poisons the output, runs the decode kernel with `plan`, returns its status and the output.
  Status run_decode(const kernels::DecodeSplitPlan& plan, std::vector<float>* out,
                    kernels::DecodeKernel kernel = kernels::DecodeKernel::kAuto) {
    const std::int64_t floats = std::max<std::int64_t>(
        kernels::decode_workspace_floats(static_cast<std::int64_t>(c_.seqs.size()), c_.num_heads,
                                         c_.head_dim, plan),
        1);
    DeviceVector<float> partial_out(static_cast<std::size_t>(floats));
    DeviceVector<float> partial_lse(static_cast<std::size_t>(floats / c_.head_dim + 1));
    d_out_->poison();
    const Status s = kernels::launch_paged_decode_attention(params(), plan,
                                                            {.partial_out = partial_out.data(),
                                                             .partial_lse = partial_lse.data(),
                                                             .capacity_floats = floats},
                                                            kernel, nullptr);
    if (!s.ok()) return s;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *out = d_out_->download();
    return s;
  }

  /// A mixed step: the prefill `prefill` kernel skips the sequences with one query, and the
  /// decode `decode` kernel runs only those (decode_seq_ids), both into the one poisoned output.
  Status run_mixed(kernels::PrefillKernel prefill, kernels::DecodeKernel decode, int partition_size,
                   std::vector<float>* out) {
    std::vector<std::int32_t> decode_ids;
    int longest = 1;
    for (std::size_t s = 0; s < c_.seqs.size(); ++s) {
      if (c_.seqs[s].q_len != 1) continue;
      decode_ids.push_back(static_cast<std::int32_t>(s));
      longest = std::max(longest, c_.seqs[s].seq_len);
    }
    const kernels::DecodeSplitPlan plan{
        .num_splits = (longest + partition_size - 1) / partition_size,
        .partition_size = partition_size};
    const auto count = static_cast<std::int64_t>(decode_ids.size());
    const std::int64_t floats = std::max<std::int64_t>(
        kernels::decode_workspace_floats(count, c_.num_heads, c_.head_dim, plan), 1);
    DeviceVector<float> partial_out(static_cast<std::size_t>(floats));
    DeviceVector<float> partial_lse(static_cast<std::size_t>(floats / c_.head_dim + 1));
    DeviceVector<std::int32_t> d_ids(decode_ids.empty() ? std::vector<std::int32_t>{0}
                                                        : decode_ids);
    d_out_->poison();
    kernels::PagedAttentionParams prefill_params = params();
    prefill_params.skip_single_query = true;
    Status s =
        kernels::launch_paged_prefill_attention(prefill_params, max_query_len_, prefill, nullptr);
    if (!s.ok()) return s;
    kernels::PagedAttentionParams decode_params = params();
    decode_params.num_seqs = count;
    decode_params.decode_seq_ids = d_ids.data();
    s = kernels::launch_paged_decode_attention(decode_params, plan,
                                               {.partial_out = partial_out.data(),
                                                .partial_lse = partial_lse.data(),
                                                .capacity_floats = floats},
                                               decode, nullptr);
    if (!s.ok()) return s;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *out = d_out_->download();
    return s;
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

  const std::vector<float>& want() const { return want_; }
  std::int64_t max_seq_len() const { return max_seq_len_; }

 private:
  AttentionCase c_;
  ScalarType type_;
  std::int64_t q_row_stride_;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_tables_;
  std::int64_t num_tokens_ = 0, max_blocks_ = 0, num_blocks_ = 0, max_query_len_ = 0;
  std::int64_t max_seq_len_ = 0;
  std::vector<float> q_, want_;
  float scale_ = 0.0f;
  std::optional<Fp8Scales> fp8_;
  std::unique_ptr<DeviceArray> d_q_, d_k_, d_v_, d_out_;
  std::unique_ptr<DeviceVector<std::uint8_t>> d_k_codes_, d_v_codes_;  // FP8 only
  std::unique_ptr<DeviceVector<std::int32_t>> d_qsl_, d_seq_lens_, d_tables_;
};

}  // namespace pagoda::gpu_test
