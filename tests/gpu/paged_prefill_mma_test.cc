// The tensor-core prefill attention (PrefillKernel::kMma16 and kMma32) against the CPU oracle
// (cpu::paged_attention_reference, in double) and against the CUDA-core reference kernel, on
// fresh random q/K/V with shuffled block tables and NaN-poisoned outputs, at the awkward sizes:
// query lengths 1, 15, 16, 17, 63, 64, 65, 511, 513, mixed lengths in one batch, cached prefixes
// (chunked prefill and prefix hits: a chunk's queries start after cached keys, at offsets that
// are and are not multiples of the 64-key tile), page sizes 16, 64 and 24 (not a power of two),
// GQA ratios 1, 4 and 8, head dims 64 and 128, bf16 and f16. Each sequence is compared on its
// own, so a wrong short sequence cannot hide behind a long one.
//
// Tolerances (u = unit roundoff of the dtype; q, K, V are rounded to the dtype before either side
// sees them):
//   reference kernel vs oracle: fp32 arithmetic, then one rounding of the output: 2u + 2e-5
//     (the bound paged_attention_test.cc states).
//   mma kernel vs oracle: Q K^T is exact products in fp32 accumulators; P is rounded to the
//     dtype before P V (one more rounding of each weight, relative u, so at most u of the
//     output in L2); the output is rounded once: 3u + 2e-5.
//   mma kernel vs reference kernel: the two bounds added (triangle inequality): 5u + 4e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/paged_attention.h"
#include "kernels/attention/paged_attention.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;
using kernels::PrefillKernel;

struct Sequence {
  std::int32_t q_len;
  std::int32_t seq_len;
};

struct PrefillCase {
  std::vector<Sequence> seqs;
  std::int64_t head_dim;
  std::int64_t num_heads;
  std::int64_t num_kv_heads;
  std::int64_t block_size;
};

std::string describe(const PrefillCase& c, ScalarType type) {
  std::string s = std::string(gpu_test::name_of(type)) + " d" + std::to_string(c.head_dim) +
                  " heads " + std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads) +
                  " page " + std::to_string(c.block_size) + " seqs";
  for (const Sequence& q : c.seqs) {
    s += " (" + std::to_string(q.q_len) + "/" + std::to_string(q.seq_len) + ")";
  }
  return s;
}

// One random batch and cache (GPU layout [block, kv_head, offset, d]), the oracle's answer, and
// runs of any prefill kernel on it. `row_pad` extra elements per q row test a q_row_stride that
// is not num_heads * head_dim.
class PrefillBatch {
 public:
  PrefillBatch(const PrefillCase& c, ScalarType type, std::mt19937& rng, std::int64_t row_pad = 0)
      : c_(c), type_(type), q_row_stride_(c.num_heads * c.head_dim + row_pad) {
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
    cpu::paged_attention_reference(q_.data(), c.num_heads, view, batch, want_.data());

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
    d_k_ = std::make_unique<DeviceArray>(gpu_k, type);
    d_v_ = std::make_unique<DeviceArray>(gpu_v, type);
    d_out_ = std::make_unique<DeviceArray>(want_.size(), type);
    d_qsl_ = std::make_unique<DeviceVector<std::int32_t>>(query_start_loc_);
    d_seq_lens_ = std::make_unique<DeviceVector<std::int32_t>>(seq_lens_);
    d_tables_ = std::make_unique<DeviceVector<std::int32_t>>(block_tables_);
  }

  /// Poisons the output, runs `kernel`, returns its status and (when ok) the output.
  Status run(PrefillKernel kernel, std::vector<float>* out) {
    d_out_->poison();
    const kernels::PagedAttentionParams p{.q = d_q_->data(),
                                          .q_row_stride = q_row_stride_,
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
    const Status s = kernels::launch_paged_prefill_attention(p, max_query_len_, kernel, nullptr);
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

 private:
  PrefillCase c_;
  ScalarType type_;
  std::int64_t q_row_stride_;
  std::vector<std::int32_t> query_start_loc_, seq_lens_, block_tables_;
  std::int64_t num_tokens_ = 0, max_blocks_ = 0, num_blocks_ = 0, max_query_len_ = 0;
  std::vector<float> q_, want_;
  float scale_ = 0.0f;
  std::unique_ptr<DeviceArray> d_q_, d_k_, d_v_, d_out_;
  std::unique_ptr<DeviceVector<std::int32_t>> d_qsl_, d_seq_lens_, d_tables_;
};

TEST(GpuPagedPrefillMma, MatchesCpuOracleAndReferenceKernel) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(20);
  const std::vector<PrefillCase> cases = {
      {{{1, 1}}, 64, 4, 4, 16},
      {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
      {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
      {{{63, 63}, {64, 64}, {65, 65}}, 128, 4, 4, 64},
      {{{511, 511}}, 128, 32, 8, 16},
      {{{513, 513}, {3, 16}}, 64, 32, 4, 64},
      // Cached prefixes: context 500 (not a tile multiple), 187, 64 and 0 in one batch.
      {{{100, 600}, {513, 700}, {64, 128}, {17, 17}}, 128, 32, 8, 16},
      {{{130, 1000}, {1, 77}}, 64, 4, 4, 64},
      {{{64, 4097}}, 128, 8, 1, 16},             // a late chunk of a long prompt (chunked prefill)
      {{{200, 333}, {31, 50}}, 128, 16, 2, 24},  // page size not a power of two
  };
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    const double u = gpu_test::unit_roundoff(type);
    const double tol_ref = 2 * u + 2e-5, tol_mma = 3 * u + 2e-5, tol_vs_ref = 5 * u + 4e-5;
    for (const PrefillCase& c : cases) {
      const std::string what = describe(c, type);
      PrefillBatch batch(c, type, rng);
      std::vector<float> ref;
      ASSERT_TRUE(batch.run(PrefillKernel::kReference, &ref).ok()) << what;
      const double ref_err = batch.worst_error(ref, batch.want(), what + " reference");
      EXPECT_LE(ref_err, tol_ref) << what << " reference";
      for (PrefillKernel kernel : {PrefillKernel::kMma16, PrefillKernel::kMma32}) {
        const char* name = kernel == PrefillKernel::kMma16 ? "mma16" : "mma32";
        std::vector<float> got, again;
        const Status s = batch.run(kernel, &got);
        ASSERT_TRUE(s.ok()) << what << " " << name << ": " << s.to_string();
        const double err = batch.worst_error(got, batch.want(), what + " " + name);
        const double vs_ref = batch.worst_error(got, ref, what + " " + name + " vs reference");
        EXPECT_LE(err, tol_mma) << what << " " << name;
        EXPECT_LE(vs_ref, tol_vs_ref) << what << " " << name << " vs reference";
        // Same inputs, same bits: a difference would be a race.
        ASSERT_TRUE(batch.run(kernel, &again).ok());
        EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float)))
            << what << " " << name << ": two runs differ";
        std::printf("[prefill mma] %-70s %s: err %.2e (ref kernel %.2e, tol %.2e), vs ref %.2e\n",
                    what.c_str(), name, err, ref_err, tol_mma, vs_ref);
      }
    }
  }
}

TEST(GpuPagedPrefillMma, AutoDispatch) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  const PrefillCase c{{{37, 90}, {70, 70}}, 128, 8, 2, 16};
  {
    // bf16, aligned: kAuto is the tensor-core kernel, bit for bit.
    PrefillBatch batch(c, ScalarType::kBF16, rng);
    std::vector<float> a, b;
    ASSERT_TRUE(batch.run(PrefillKernel::kAuto, &a).ok());
    ASSERT_TRUE(batch.run(PrefillKernel::kMma16, &b).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  {
    // f32: only the reference kernel applies.
    PrefillBatch batch(c, ScalarType::kF32, rng);
    std::vector<float> a;
    EXPECT_FALSE(batch.run(PrefillKernel::kMma16, &a).ok());
    ASSERT_TRUE(batch.run(PrefillKernel::kAuto, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "f32 auto"), 2 * 0x1p-24 + 2e-5);
  }
  {
    // A q row stride that breaks 16-byte alignment of q rows: kAuto falls back to the reference.
    PrefillBatch batch(c, ScalarType::kF16, rng, /*row_pad=*/4);
    std::vector<float> a;
    EXPECT_FALSE(batch.run(PrefillKernel::kMma32, &a).ok());
    ASSERT_TRUE(batch.run(PrefillKernel::kAuto, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "f16 padded auto"),
              2 * gpu_test::unit_roundoff(ScalarType::kF16) + 2e-5);
  }
  {
    // A padded but still aligned stride (8 elements) keeps the tensor-core kernel.
    PrefillBatch batch(c, ScalarType::kBF16, rng, /*row_pad=*/8);
    std::vector<float> a;
    ASSERT_TRUE(batch.run(PrefillKernel::kMma16, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "bf16 padded mma"),
              3 * gpu_test::unit_roundoff(ScalarType::kBF16) + 2e-5);
  }
}

}  // namespace
}  // namespace pagoda
