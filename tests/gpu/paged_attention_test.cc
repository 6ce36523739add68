// Paged prefill and decode attention against the CPU oracle (cpu::paged_attention_reference, in
// double) on random q/K/V with shuffled block tables, at the awkward sizes: sequence lengths 1,
// 15, 16, 17, 511, 513, 4097, mixed lengths in one batch, chunked prefill (q_len < seq_len), page
// sizes 16 and 64, GQA ratios 1, 4, 7 and 8, head dims 64 and 128, one and many decode splits.
//
// Tolerance: q, K and V are rounded to the dtype before either side sees them, so the remaining
// differences are fp32 accumulation in the kernel (about sqrt(seq_len) * 6e-8 relative) and its
// final rounding to the dtype (at most u per element): relative L2 <= 2u + 2e-5.
#include "backend/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/kv_cache_view.h"
#include "kernels/attention/paged_attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;

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
};

std::string describe(const AttentionCase& c, ScalarType type) {
  std::string s = std::string(gpu_test::name_of(type)) + " d" + std::to_string(c.head_dim) +
                  " heads " + std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads) +
                  " page " + std::to_string(c.block_size) + " seqs";
  for (const Sequence& q : c.seqs) {
    s += " (" + std::to_string(q.q_len) + "/" + std::to_string(q.seq_len) + ")";
  }
  return s;
}

// Builds one random batch and cache, runs the oracle once, and checks the requested kernels.
class AttentionFixture {
 public:
  AttentionFixture(const AttentionCase& c, ScalarType type, std::mt19937& rng)
      : c_(c), type_(type) {
    const std::int64_t d = c.head_dim;
    query_start_loc_.push_back(0);
    std::int64_t max_blocks = 0;
    std::int64_t total_blocks = 0;
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
    max_blocks_ = std::max<std::int64_t>(max_blocks, 1);
    num_blocks_ = total_blocks + 3;  // a few blocks nobody owns
    // Every sequence gets distinct blocks in shuffled order; unused table entries are -1.
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
    // The CPU pool is [block, offset, kv_head, d]; the GPU pool [block, kv_head, offset, d].
    cpu_k_ = gpu_test::round_to(gpu_test::random_vector(cache_elems, rng), type);
    cpu_v_ = gpu_test::round_to(gpu_test::random_vector(cache_elems, rng), type);
    std::vector<float> gpu_k(cache_elems), gpu_v(cache_elems);
    for (std::int64_t b = 0; b < num_blocks_; ++b) {
      for (std::int64_t o = 0; o < c.block_size; ++o) {
        for (std::int64_t h = 0; h < c.num_kv_heads; ++h) {
          for (std::int64_t e = 0; e < d; ++e) {
            const auto from =
                static_cast<std::size_t>(((b * c.block_size + o) * c.num_kv_heads + h) * d + e);
            const auto to =
                static_cast<std::size_t>(((b * c.num_kv_heads + h) * c.block_size + o) * d + e);
            gpu_k[to] = cpu_k_[from];
            gpu_v[to] = cpu_v_[from];
          }
        }
      }
    }
    // q uniform(-4, 4) against K in (-1, 1): scores of a few units after the 1/sqrt(d) scale, a
    // softmax peaked enough that a wrong mask, position or block shows.
    scale_ = 1.0f / std::sqrt(static_cast<float>(d));
    q_ = gpu_test::round_to(
        gpu_test::random_vector(static_cast<std::size_t>(num_tokens_ * c.num_heads * d), rng, -4.0f,
                                4.0f),
        type);

    want_.resize(q_.size());
    cpu::KvCacheView view{.k = cpu_k_.data(),
                          .v = cpu_v_.data(),
                          .num_blocks = num_blocks_,
                          .block_size = c.block_size,
                          .num_kv_heads = c.num_kv_heads,
                          .head_dim = d};
    cpu::AttentionBatch batch{.query_start_loc = query_start_loc_.data(),
                              .seq_lens = seq_lens_.data(),
                              .block_tables = block_tables_.data(),
                              .num_seqs = static_cast<std::int64_t>(c.seqs.size()),
                              .max_blocks_per_seq = max_blocks_};
    cpu::paged_attention_reference(q_.data(), c.num_heads, view, batch, want_.data());

    d_q_ = std::make_unique<DeviceArray>(q_, type);
    d_k_ = std::make_unique<DeviceArray>(gpu_k, type);
    d_v_ = std::make_unique<DeviceArray>(gpu_v, type);
    d_out_ = std::make_unique<DeviceArray>(q_.size(), type);
    d_qsl_ = std::make_unique<DeviceVector<std::int32_t>>(query_start_loc_);
    d_seq_lens_ = std::make_unique<DeviceVector<std::int32_t>>(seq_lens_);
    d_tables_ = std::make_unique<DeviceVector<std::int32_t>>(block_tables_);
  }

  kernels::PagedAttentionParams params() const {
    return {.q = d_q_->data(),
            .q_row_stride = c_.num_heads * c_.head_dim,
            .out = d_out_->data(),
            .cache = {.k = d_k_->data(),
                      .v = d_v_->data(),
                      .num_blocks = num_blocks_,
                      .block_size = c_.block_size,
                      .num_kv_heads = c_.num_kv_heads,
                      .head_dim = c_.head_dim},
            .query_start_loc = d_qsl_->data(),
            .seq_lens = d_seq_lens_->data(),
            .block_tables = d_tables_->data(),
            .num_seqs = static_cast<std::int64_t>(c_.seqs.size()),
            .max_blocks_per_seq = max_blocks_,
            .num_heads = c_.num_heads,
            .softmax_scale = scale_,
            .dtype = type_};
  }

  void check_prefill(const std::string& what) {
    d_out_->poison();
    const Status s = kernels::launch_paged_prefill_attention(params(), max_query_len_, nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    gpu_test::expect_close(d_out_->download(), want_, tolerance(), what + " prefill");
  }

  void check_decode(const kernels::DecodeSplitPlan& plan, const std::string& what) {
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
                                                            nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    gpu_test::expect_close(d_out_->download(), want_, tolerance(),
                           what + " decode splits " + std::to_string(plan.num_splits) + " x " +
                               std::to_string(plan.partition_size));
  }

  std::int64_t max_seq_len() const { return max_seq_len_; }

 private:
  double tolerance() const { return 2.0 * gpu_test::unit_roundoff(type_) + 2e-5; }

  AttentionCase c_;
  ScalarType type_;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_tables_;
  std::int64_t num_tokens_ = 0, max_blocks_ = 0, num_blocks_ = 0;
  std::int64_t max_query_len_ = 0, max_seq_len_ = 0;
  std::vector<float> cpu_k_, cpu_v_, q_, want_;
  float scale_ = 0.0f;
  std::unique_ptr<DeviceArray> d_q_, d_k_, d_v_, d_out_;
  std::unique_ptr<DeviceVector<std::int32_t>> d_qsl_, d_seq_lens_, d_tables_;
};

TEST(GpuPagedAttention, PrefillMatchesCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(10);
  const std::vector<AttentionCase> cases = {
      {{{1, 1}}, 64, 4, 4, 16},
      {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
      {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
      {{{511, 511}}, 128, 32, 8, 16},
      {{{513, 513}, {3, 16}}, 64, 28, 4, 64},
      {{{64, 4097}}, 128, 8, 1, 16},  // a late chunk of a long prompt (chunked prefill)
      {{{32, 4097}, {16, 4097}}, 64, 16, 2, 64},
  };
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : cases) {
      AttentionFixture fixture(c, type, rng);
      fixture.check_prefill(describe(c, type));
    }
  }
}

TEST(GpuPagedAttention, DecodeMatchesCpuOracleWithOneAndManySplits) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  const std::vector<AttentionCase> cases = {
      {{{1, 1}, {1, 15}, {1, 16}, {1, 17}}, 128, 32, 8, 16},
      {{{1, 511}, {1, 513}, {1, 1}}, 64, 8, 8, 16},
      {{{1, 4097}}, 128, 28, 4, 64},
      {{{1, 4097}, {1, 17}, {1, 600}}, 64, 32, 4, 64},
      {{{1, 513}, {1, 2}}, 128, 16, 1, 16},  // group 16: two chunks of 8 q heads per KV head
  };
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : cases) {
      AttentionFixture fixture(c, type, rng);
      const std::string what = describe(c, type);
      const auto longest = static_cast<int>(fixture.max_seq_len());
      fixture.check_decode({.num_splits = 1, .partition_size = longest}, what);
      fixture.check_decode({.num_splits = (longest + 15) / 16, .partition_size = 16}, what);
      fixture.check_decode({.num_splits = (longest + 99) / 100, .partition_size = 100}, what);
      // The decode kernel agrees with the prefill kernel on the same batch as well.
      fixture.check_prefill(what);
    }
  }
}

TEST(GpuPagedAttention, SplitPlanCoversTheLongestSequence) {
  // Host-only planning: runs everywhere.
  for (std::int64_t seqs : {1, 8, 64, 256}) {
    for (std::int64_t len : {1, 17, 512, 4097, 32768}) {
      const kernels::DecodeSplitPlan plan = kernels::plan_decode_splits(seqs, 8, 32, len, 132, 64);
      EXPECT_GE(plan.num_splits, 1);
      EXPECT_LE(plan.num_splits, 64);
      EXPECT_GE(static_cast<std::int64_t>(plan.num_splits) * plan.partition_size, len);
      if (seqs >= 64) {
        EXPECT_EQ(plan.num_splits, 1) << "enough CTAs without splitting";
      }
    }
  }
  EXPECT_GT(kernels::plan_decode_splits(1, 8, 32, 32768, 132, 64).num_splits, 1);
}

}  // namespace
}  // namespace pagoda
