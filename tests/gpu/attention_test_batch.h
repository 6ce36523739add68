// The attention tests' shared input on the GPU: the random batch and oracle answer of
// attention_reference.h in device memory, and runs of the prefill and decode kernels on it with
// NaN-poisoned outputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention/paged_attention.h"
#include "tests/gpu/attention_reference.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::gpu_test {

using cuda::ScalarType;

/// The cases a test runs in `type`, one of the dtypes it loops over: all of them on a GPU; on
/// the emulation case i only in types[i % N], so that every dtype's kernel instances still run,
/// in 1/N of the time.
template <std::size_t N>
std::vector<AttentionCase> cases_in(const ScalarType (&types)[N], ScalarType type,
                                    const std::vector<AttentionCase>& cases) {
  if (!kEmulated) return cases;
  std::vector<AttentionCase> mine;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (types[i % N] == type) mine.push_back(cases[i]);
  }
  return mine;
}

// The shared batch (HostAttentionBatch) in device memory, and runs of the prefill and decode
// kernels on it with NaN-poisoned outputs.
class AttentionBatch {
 public:
  AttentionBatch(const AttentionCase& c, ScalarType type, std::mt19937& rng,
                 std::int64_t row_pad = 0, std::optional<Fp8Scales> fp8 = std::nullopt)
      : host_(c, type, rng, row_pad, fp8), c_(c) {
    d_q_ = std::make_unique<DeviceArray>(host_.q_padded(), type);
    if (fp8) {
      d_k_codes_ = std::make_unique<DeviceVector<std::uint8_t>>(host_.gpu_k_codes());
      d_v_codes_ = std::make_unique<DeviceVector<std::uint8_t>>(host_.gpu_v_codes());
    } else {
      d_k_ = std::make_unique<DeviceArray>(host_.gpu_k(), type);
      d_v_ = std::make_unique<DeviceArray>(host_.gpu_v(), type);
    }
    d_out_ = std::make_unique<DeviceArray>(host_.want().size(), type);
    d_qsl_ = std::make_unique<DeviceVector<std::int32_t>>(host_.query_start_loc());
    d_seq_lens_ = std::make_unique<DeviceVector<std::int32_t>>(host_.seq_lens());
    d_tables_ = std::make_unique<DeviceVector<std::int32_t>>(host_.block_tables());
  }

  /// The kernels' parameters over this batch's device arrays.
  kernels::PagedAttentionParams params() const {
    const bool fp8 = host_.fp8();
    return host_.params({.q = d_q_->data(),
                         .out = d_out_->data(),
                         .k = fp8 ? static_cast<void*>(d_k_codes_->data()) : d_k_->data(),
                         .v = fp8 ? static_cast<void*>(d_v_codes_->data()) : d_v_->data(),
                         .query_start_loc = d_qsl_->data(),
                         .seq_lens = d_seq_lens_->data(),
                         .block_tables = d_tables_->data()});
  }

  /// Poisons the output, runs the prefill `kernel`, returns its status and (when ok) the output.
  Status run_prefill(kernels::PrefillKernel kernel, std::vector<float>* out) {
    d_out_->poison();
    const Status s =
        kernels::launch_paged_prefill_attention(params(), host_.max_query_len(), kernel, nullptr);
    if (!s.ok()) return s;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    *out = d_out_->download();
    return s;
  }

  /// Poisons the output, runs the decode kernel with `plan` (over the sequences
  /// `decode_seq_ids` only, when given, as a mixed step's decode does), returns its status and
  /// the output.
  Status run_decode(const kernels::DecodeSplitPlan& plan, std::vector<float>* out,
                    kernels::DecodeKernel kernel = kernels::DecodeKernel::kAuto,
                    const std::vector<std::int32_t>& decode_seq_ids = {}) {
    kernels::PagedAttentionParams p = params();
    std::optional<DeviceVector<std::int32_t>> d_ids;
    if (!decode_seq_ids.empty()) {
      d_ids.emplace(decode_seq_ids);
      p.num_seqs = static_cast<std::int64_t>(decode_seq_ids.size());
      p.decode_seq_ids = d_ids->data();
    }
    const std::int64_t floats = std::max<std::int64_t>(
        kernels::decode_workspace_floats(p.num_seqs, c_.num_heads, c_.head_dim, plan), 1);
    DeviceVector<float> partial_out(static_cast<std::size_t>(floats));
    DeviceVector<float> partial_lse(static_cast<std::size_t>(floats / c_.head_dim + 1));
    d_out_->poison();
    const Status s = kernels::launch_paged_decode_attention(p, plan,
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
    Status s = kernels::launch_paged_prefill_attention(prefill_params, host_.max_query_len(),
                                                       prefill, nullptr);
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
    return host_.worst_error(got, want, what);
  }

  const std::vector<float>& want() const { return host_.want(); }
  std::int64_t max_seq_len() const { return host_.max_seq_len(); }

 private:
  HostAttentionBatch host_;
  AttentionCase c_;
  std::unique_ptr<DeviceArray> d_q_, d_k_, d_v_, d_out_;
  std::unique_ptr<DeviceVector<std::uint8_t>> d_k_codes_, d_v_codes_;  // FP8 only
  std::unique_ptr<DeviceVector<std::int32_t>> d_qsl_, d_seq_lens_, d_tables_;
};

}  // namespace pagoda::gpu_test
