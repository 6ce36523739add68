// Paged prefill and decode attention against the CPU oracle (cpu::paged_attention_reference, in
// double) on random q/K/V with shuffled block tables, at the awkward sizes: sequence lengths 1,
// 15, 16, 17, 511, 513, 4097, mixed lengths in one batch, chunked prefill (q_len < seq_len), page
// sizes 16 and 64, GQA ratios 1, 4, 7 and 8, head dims 64 and 128, one and many decode splits.
//
// Tolerance: q, K and V are rounded to the dtype before either side sees them, so the remaining
// differences are fp32 accumulation in the kernel (about sqrt(seq_len) * 6e-8 relative) and its
// final rounding to the dtype (at most u per element): relative L2 <= 2u + 2e-5; the tensor-core
// prefill and decode kernels round P once more (3u + 2e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "tests/gpu/attention_test_batch.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionBatch;
using gpu_test::AttentionCase;

// The shared batch, checked against the oracle. Prefill runs through kAuto, which is the
// tensor-core kernel for bf16/f16 (one more rounding, of P before P V: 3u + 2e-5, see
// paged_prefill_mma_test.cc) and the CUDA-core reference for f32.
class AttentionFixture {
 public:
  AttentionFixture(const AttentionCase& c, ScalarType type, std::mt19937& rng)
      : batch_(c, type, rng), type_(type) {}

  void check_prefill(const std::string& what) {
    std::vector<float> out;
    const Status s = batch_.run_prefill(kernels::PrefillKernel::kAuto, &out);
    ASSERT_TRUE(s.ok()) << s.to_string();
    const double u = gpu_test::unit_roundoff(type_);
    const double tolerance = (type_ == ScalarType::kF32 ? 2.0 : 3.0) * u + 2e-5;
    gpu_test::expect_close(out, batch_.want(), tolerance, what + " prefill");
  }

  // Both decode kernels against the oracle, and against each other bit for bit: they differ
  // only in how K/V bytes reach the registers, not in any arithmetic.
  void check_decode(const kernels::DecodeSplitPlan& plan, const std::string& what) {
    const std::string label =
        what + " decode splits " + std::to_string(plan.num_splits) + " x " +
        (plan.device_partition_size != nullptr ? "(from device memory)"
                                               : std::to_string(plan.partition_size));
    std::vector<float> registers;
    std::vector<float> pipelined;
    for (const auto& [kernel, out] : {std::pair{kernels::DecodeKernel::kRegisters, &registers},
                                      std::pair{kernels::DecodeKernel::kPipelined, &pipelined}}) {
      const Status s = batch_.run_decode(plan, out, kernel);
      ASSERT_TRUE(s.ok()) << s.to_string();
      gpu_test::expect_close(*out, batch_.want(), 2.0 * gpu_test::unit_roundoff(type_) + 2e-5,
                             label + (out == &pipelined ? " (pipelined)" : " (registers)"));
    }
    ASSERT_EQ(registers.size(), pipelined.size());
    for (std::size_t i = 0; i < registers.size(); ++i) {
      ASSERT_EQ(std::memcmp(&registers[i], &pipelined[i], sizeof(float)), 0)
          << label << ": the kernels differ at element " << i << " (" << registers[i] << " vs "
          << pipelined[i] << ")";
    }
    // The tensor-core kernel rounds P to the dtype before P V, as the tensor-core prefill does:
    // the same 3u bound. It has no f32 instance, where kAuto is the pipelined kernel.
    if (type_ == ScalarType::kF32) {
      check_auto_decode(plan, label, pipelined);
      return;
    }
    std::vector<float> tensor_cores;
    const Status s = batch_.run_decode(plan, &tensor_cores, kernels::DecodeKernel::kTensorCores);
    ASSERT_TRUE(s.ok()) << s.to_string();
    gpu_test::expect_close(tensor_cores, batch_.want(), 3.0 * gpu_test::unit_roundoff(type_) + 2e-5,
                           label + " (tensor cores)");
    check_auto_decode(plan, label, tensor_cores);
  }

  // kAuto (the executor's choice) is the tensor-core kernel at bf16/f16 and the pipelined one
  // at f32, bit for bit, unless PAGODA_DECODE_ATTENTION names another.
  void check_auto_decode(const kernels::DecodeSplitPlan& plan, const std::string& label,
                         const std::vector<float>& expected) {
    const char* env = std::getenv("PAGODA_DECODE_ATTENTION");
    if (env != nullptr && *env != '\0' && std::string_view(env) != "auto") return;
    std::vector<float> chosen;
    const Status s = batch_.run_decode(plan, &chosen, kernels::DecodeKernel::kAuto);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(chosen.size(), expected.size());
    EXPECT_EQ(std::memcmp(chosen.data(), expected.data(), chosen.size() * sizeof(float)), 0)
        << label << ": kAuto is not the kernel it should pick";
  }

  std::int64_t max_seq_len() const { return batch_.max_seq_len(); }

 private:
  AttentionBatch batch_;
  ScalarType type_;
};

TEST(GpuPagedAttention, PrefillMatchesCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(10);
  // The emulation's: the same features at fewer heads and keys.
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}}, 64, 4, 4, 16},
          {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
          {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
          {{{511, 511}}, 128, 32, 8, 16},
          {{{513, 513}, {3, 16}}, 64, 28, 4, 64},
          {{{64, 4097}}, 128, 8, 1, 16},  // a late chunk of a long prompt (chunked prefill)
          {{{32, 4097}, {16, 4097}}, 64, 16, 2, 64},
      },
      {
          {{{1, 1}}, 64, 4, 4, 16},
          {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
          {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
          {{{64, 700}}, 128, 8, 1, 16},
          {{{513, 513}, {3, 16}}, 64, 4, 1, 64},
          {{{32, 300}, {16, 200}}, 64, 8, 1, 64},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionFixture fixture(c, type, rng);
      fixture.check_prefill(gpu_test::describe(c, type));
    }
  }
}

TEST(GpuPagedAttention, DecodeMatchesCpuOracleWithOneAndManySplits) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {1, 15}, {1, 16}, {1, 17}}, 128, 32, 8, 16},
          {{{1, 511}, {1, 513}, {1, 1}}, 64, 8, 8, 16},
          {{{1, 4097}}, 128, 28, 4, 64},
          {{{1, 4097}, {1, 17}, {1, 600}}, 64, 32, 4, 64},
          {{{1, 513}, {1, 2}}, 128, 16, 1, 16},  // group 16: two chunks of 8 q heads per KV head
          {{{1, 1000}, {1, 33}, {1, 16}}, 128, 32, 8, 24},  // pages that 16-key tiles straddle
          {{{1, 700}, {1, 40}}, 128, 8, 2, 16, 100},        // a sliding window of 100
          {{{1, 301}}, 64, 12, 2, 64, 37},                  // group 6, window not a multiple of 16
      },
      {
          {{{1, 1}, {1, 15}, {1, 16}, {1, 17}}, 128, 8, 2, 16},
          {{{1, 130}, {1, 1}}, 64, 2, 2, 16},
          {{{1, 1000}}, 128, 7, 1, 64},
          {{{1, 600}, {1, 17}}, 64, 8, 1, 64},
          {{{1, 130}, {1, 2}}, 128, 16, 1, 16},
          {{{1, 300}, {1, 33}, {1, 16}}, 128, 4, 1, 24},
          {{{1, 301}}, 64, 6, 1, 64, 37},
          {{{1, 230}, {1, 40}}, 128, 4, 1, 16, 100},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionFixture fixture(c, type, rng);
      const std::string what = gpu_test::describe(c, type);
      const auto longest = static_cast<int>(fixture.max_seq_len());
      fixture.check_decode({.num_splits = 1, .partition_size = longest}, what);
      fixture.check_decode({.num_splits = (longest + 15) / 16, .partition_size = 16}, what);
      fixture.check_decode({.num_splits = (longest + 99) / 100, .partition_size = 100}, what);
      // The planner's whole-tile partitions; and a CUDA graph's fixed grid: more splits than the
      // partition needs, the partition read from device memory (the step's metadata).
      fixture.check_decode(kernels::decode_plan_with_splits(longest, 8), what);
      const gpu_test::DeviceVector<std::int32_t> partition(std::vector<std::int32_t>{64});
      fixture.check_decode({.num_splits = (longest + 63) / 64 + 2,
                            .partition_size = 1,
                            .device_partition_size = partition.data()},
                           what);
      // The decode kernel agrees with the prefill kernel on the same batch as well.
      fixture.check_prefill(what);
    }
  }
}

// A mixed step: decodes (one query) through the decode kernel, the rest through the prefill
// kernel, each skipping the other's sequences; every row against the oracle, none left NaN.
TEST(GpuPagedAttention, MixedBatchSplitsBetweenTheDecodeAndPrefillKernels) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 500}, {37, 37}, {1, 33}, {300, 1000}, {1, 1}}, 128, 32, 8, 16},
          {{{64, 64}, {1, 4097}, {1, 17}}, 64, 8, 1, 64},
          {{{1, 700}, {20, 120}, {1, 40}}, 128, 8, 2, 16, 100},  // a sliding window
      },
      {
          {{{64, 64}, {1, 400}, {1, 17}}, 64, 8, 1, 64},
          {{{1, 200}, {37, 37}, {1, 33}, {70, 200}, {1, 1}}, 128, 4, 1, 16},
          {{{1, 230}, {20, 120}, {1, 40}}, 128, 4, 1, 16, 100},
      });
  using kernels::DecodeKernel;
  using kernels::PrefillKernel;
  for (ScalarType type : gpu_test::kAllTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      gpu_test::AttentionBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type) + " mixed";
      for (const DecodeKernel decode :
           {DecodeKernel::kPipelined, DecodeKernel::kRegisters, DecodeKernel::kTensorCores}) {
        if (decode == DecodeKernel::kTensorCores && type == ScalarType::kF32) continue;
        for (const int partition : {100000, 128}) {  // one split, and many with the merge
          std::vector<float> out;
          const Status s = batch.run_mixed(PrefillKernel::kAuto, decode, partition, &out);
          ASSERT_TRUE(s.ok()) << s.to_string();
          gpu_test::expect_close(
              out, batch.want(), (type == ScalarType::kF32 ? 2.0 : 3.0) * u + 2e-5,
              what + " decode kernel " + std::to_string(static_cast<int>(decode)) + " partition " +
                  std::to_string(partition));
        }
      }
    }
  }
}

// A mixed step's decode subset (decode_seq_ids) alone: only its sequences' rows are written, each
// against the oracle, with the partials laid out by place in the subset.
TEST(GpuPagedAttention, DecodeSubsetWritesOnlyItsSequences) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  const AttentionCase c{{{1, 500}, {1, 33}, {1, 1}, {1, 90}}, 128, 8, 2, 16};
  const ScalarType type = ScalarType::kBF16;
  AttentionBatch batch(c, type, rng);
  const std::vector<std::int32_t> subset = {3, 0};
  const std::int64_t row = c.num_heads * c.head_dim;
  using kernels::DecodeKernel;
  for (const DecodeKernel kernel :
       {DecodeKernel::kRegisters, DecodeKernel::kPipelined, DecodeKernel::kTensorCores}) {
    const double tolerance =
        (kernel == DecodeKernel::kTensorCores ? 3.0 : 2.0) * gpu_test::unit_roundoff(type) + 2e-5;
    for (const kernels::DecodeSplitPlan plan :
         {kernels::DecodeSplitPlan{.num_splits = 1, .partition_size = 500},
          kernels::decode_plan_with_splits(500, 4),
          kernels::DecodeSplitPlan{.num_splits = 5, .partition_size = 100}}) {
      const std::string label = "decode kernel " + std::to_string(static_cast<int>(kernel)) +
                                " splits " + std::to_string(plan.num_splits);
      std::vector<float> out;
      const Status s = batch.run_decode(plan, &out, kernel, subset);
      ASSERT_TRUE(s.ok()) << label << ": " << s.to_string();
      for (std::int32_t seq = 0; seq < static_cast<std::int32_t>(c.seqs.size()); ++seq) {
        const std::vector<float> got(out.begin() + seq * row, out.begin() + (seq + 1) * row);
        if (std::find(subset.begin(), subset.end(), seq) == subset.end()) {
          EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isnan(x); }))
              << label << ": seq " << seq << " is not in the subset but was written";
          continue;
        }
        const std::vector<float> want(batch.want().begin() + seq * row,
                                      batch.want().begin() + (seq + 1) * row);
        gpu_test::expect_close(got, want, tolerance, label + " seq " + std::to_string(seq));
      }
    }
  }
}

TEST(GpuPagedAttention, DecodeKernelNames) {
  // Host-only: PAGODA_DECODE_ATTENTION's values.
  using kernels::DecodeKernel;
  EXPECT_EQ(*kernels::parse_decode_kernel(""), DecodeKernel::kAuto);
  EXPECT_EQ(*kernels::parse_decode_kernel("auto"), DecodeKernel::kAuto);
  EXPECT_EQ(*kernels::parse_decode_kernel("registers"), DecodeKernel::kRegisters);
  EXPECT_EQ(*kernels::parse_decode_kernel("pipelined"), DecodeKernel::kPipelined);
  EXPECT_EQ(*kernels::parse_decode_kernel("tensor-cores"), DecodeKernel::kTensorCores);
  EXPECT_EQ(*kernels::parse_decode_kernel("tensor-cores-direct"), DecodeKernel::kTensorCoresDirect);
  for (const char* bad : {"tensor_cores", "Pipelined", "fa2", " auto"}) {
    const StatusOr<DecodeKernel> k = kernels::parse_decode_kernel(bad);
    ASSERT_FALSE(k.ok()) << bad;
    EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find("tensor-cores"), std::string::npos);
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

// A split count turned into a plan (the workspace-halving loops, a graph's fixed grid): whole
// 64-key partitions when split, every split holding keys, never more splits than asked.
TEST(GpuPagedAttention, PlanWithSplitsKeepsWholeTilePartitions) {
  // Host-only planning: runs everywhere.
  for (std::int64_t len : {1, 17, 64, 65, 497, 8448, 16384, 100001}) {
    for (int splits : {1, 2, 3, 7, 32, 33, 64, 300}) {
      const kernels::DecodeSplitPlan plan = kernels::decode_plan_with_splits(len, splits);
      SCOPED_TRACE("len " + std::to_string(len) + " splits " + std::to_string(splits));
      EXPECT_GE(plan.num_splits, 1);
      EXPECT_LE(plan.num_splits, splits);
      EXPECT_GE(static_cast<std::int64_t>(plan.num_splits) * plan.partition_size, len);
      EXPECT_LT(static_cast<std::int64_t>(plan.num_splits - 1) * plan.partition_size, len);
      if (splits > 1) {
        EXPECT_EQ(plan.partition_size % kernels::kDecodePartitionAlign, 0);
      } else {
        EXPECT_EQ(plan.partition_size, len);
      }
    }
  }
  // The graph fallback of the review: 33 splits of 256 wanted at 8448 keys, 32 in the grid.
  EXPECT_EQ(kernels::decode_plan_with_splits(8448, 32).partition_size, 320);
}

// The planner's invariants off the H200's shape: few SMs, a cap on splits, more than 8 queries
// per kv head (more than one CTA per head), and partitions floors under and over 64 keys.
TEST(GpuPagedAttention, SplitPlanInvariantsAcrossDevicesAndShapes) {
  // Host-only planning: runs everywhere.
  for (int sms : {1, 8, 132}) {
    for (int max_splits : {1, 4, 64}) {
      for (int min_partition : {16, 64, 256}) {
        for (const auto& [heads, kv_heads] :
             {std::pair<std::int64_t, std::int64_t>{32, 8}, {48, 2}, {16, 16}}) {
          for (std::int64_t len : {1, 63, 64, 1000, 16384}) {
            const kernels::DecodeSplitPlan plan = kernels::plan_decode_splits(
                1, kv_heads, heads, len, sms, max_splits, min_partition);
            SCOPED_TRACE("sms " + std::to_string(sms) + " max " + std::to_string(max_splits) +
                         " min " + std::to_string(min_partition) + " heads " +
                         std::to_string(heads) + "/" + std::to_string(kv_heads) + " len " +
                         std::to_string(len));
            EXPECT_GE(plan.num_splits, 1);
            EXPECT_LE(plan.num_splits, max_splits);
            EXPECT_GE(static_cast<std::int64_t>(plan.num_splits) * plan.partition_size, len);
            EXPECT_LT(static_cast<std::int64_t>(plan.num_splits - 1) * plan.partition_size, len);
            const std::int64_t ctas = kv_heads * ((heads / kv_heads + 7) / 8);
            EXPECT_LE(ctas * plan.num_splits, std::max<std::int64_t>(2 * sms, ctas));
            if (plan.num_splits > 1) {
              EXPECT_EQ(plan.partition_size % kernels::kDecodePartitionAlign, 0);
              EXPECT_GE(plan.partition_size, min_partition);
            }
          }
        }
      }
    }
  }
}

// The plans gpu_bench's split sweeps found fastest for the tensor-core kernel on the H200 (132
// SMs, Llama-3-8B's 8 kv heads of 4 queries): one wave of 2 CTAs per SM in whole 64-key tiles.
TEST(GpuPagedAttention, SplitPlanFillsOneWaveOfTwoCtasPerSm) {
  const kernels::DecodeSplitPlan g3 = kernels::plan_decode_splits(1, 8, 32, 16384, 132, 64);
  EXPECT_EQ(g3.num_splits, 32);  // 33 wanted, of 497 keys: 32 of 512
  EXPECT_EQ(g3.partition_size, 512);
  const kernels::DecodeSplitPlan b16 = kernels::plan_decode_splits(16, 8, 32, 4096, 132, 64);
  EXPECT_EQ(b16.num_splits, 2);
  EXPECT_EQ(b16.partition_size, 2048);
  EXPECT_EQ(kernels::plan_decode_splits(64, 8, 32, 2048, 132, 64).num_splits, 1);
  for (std::int64_t seqs : {1, 2, 3, 5, 8, 16, 33}) {
    for (std::int64_t len : {300, 1000, 4097, 9000, 16384, 100000}) {
      const kernels::DecodeSplitPlan plan = kernels::plan_decode_splits(seqs, 8, 32, len, 132, 64);
      EXPECT_LE(seqs * 8 * plan.num_splits, 2 * 132) << seqs << " x " << len;
      if (plan.num_splits > 1) {
        EXPECT_EQ(plan.partition_size % kernels::kDecodePartitionAlign, 0) << seqs << " x " << len;
        EXPECT_GE(plan.partition_size, 256) << seqs << " x " << len;
      }
      EXPECT_GE(static_cast<std::int64_t>(plan.num_splits) * plan.partition_size, len);
      EXPECT_LT(static_cast<std::int64_t>(plan.num_splits - 1) * plan.partition_size, len)
          << "a split past the longest sequence";
    }
  }
}

}  // namespace
}  // namespace pagoda
