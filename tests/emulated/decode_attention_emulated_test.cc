// The paged decode attention kernels (kernels/attention/paged_decode_{mma_,}kernel.cuh, through
// launch_paged_decode_attention: the dispatch, the split merge kernel) run on the CPU by the CUDA
// emulation (kernels/emulation/cuda_emulation.h) against the CPU oracle the GPU tests use
// (tests/gpu/attention_reference.h, cpu::paged_attention_reference in double), with the GPU
// tests' tolerances: 3u + 2e-5 for the tensor-core kernel (P rounded to the dtype before P V),
// 2u + 2e-5 for the CUDA-core ones, which agree with each other bit for bit.
//
// The shapes are the awkward ones at the emulation's pace (every thread a fiber): context lengths
// 1, 15 to 17, 100, 1000+ in one batch, pages that 16-key tiles straddle, GQA groups of 4, 8 and
// 16 (two chunks of q heads), head_dim 64 and 128, one split, planned splits of whole 64-key tiles
// and 16- or 100-key partitions (tiles that start mid-split), the partition read from device
// memory, a sliding window whose start 16-key tiles cross, FP8 scales far from 1, a mixed step's
// decode subset. The GPU tests run the same kernels on hardware; these are what CI can run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "kernels/attention/paged_attention.h"
#include "tests/emulated/host_memory.h"
#include "tests/gpu/attention_reference.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda::kernels {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionCase;
using gpu_test::Fp8Scales;
using gpu_test::HostAttentionBatch;

using Buffer = emulated_test::HostBuffer;

// The shared batch in (host) memory the emulated kernels read, and decode runs over it.
class EmulatedBatch {
 public:
  EmulatedBatch(const AttentionCase& c, ScalarType type, std::mt19937& rng,
                std::optional<Fp8Scales> fp8 = std::nullopt)
      : host_(c, type, rng, 0, fp8),
        type_(type),
        q_(host_.q_padded(), type),
        k_(fp8 ? Buffer(host_.gpu_k_codes()) : Buffer(host_.gpu_k(), type)),
        v_(fp8 ? Buffer(host_.gpu_v_codes()) : Buffer(host_.gpu_v(), type)),
        out_(host_.want().size() * cuda::scalar_type_size(type)),
        query_start_loc_(host_.query_start_loc()),
        seq_lens_(host_.seq_lens()),
        block_tables_(host_.block_tables()) {}

  /// Runs `kernel` with `plan` into the poisoned output (over the sequences `decode_seq_ids`
  /// only, when given, as a mixed step does); partials are poisoned too.
  Status run_decode(const DecodeSplitPlan& plan, DecodeKernel kernel, std::vector<float>* out,
                    const std::vector<std::int32_t>& decode_seq_ids = {}) {
    const AttentionCase& c = host_.attention_case();
    PagedAttentionParams p = host_.params({.q = q_.as<void>(),
                                           .out = out_.as<void>(),
                                           .k = k_.as<void>(),
                                           .v = v_.as<void>(),
                                           .query_start_loc = query_start_loc_.as<std::int32_t>(),
                                           .seq_lens = seq_lens_.as<std::int32_t>(),
                                           .block_tables = block_tables_.as<std::int32_t>()});
    const Buffer ids(decode_seq_ids);
    if (!decode_seq_ids.empty()) {
      p.num_seqs = static_cast<std::int64_t>(decode_seq_ids.size());
      p.decode_seq_ids = ids.as<std::int32_t>();
    }
    const std::int64_t floats = std::max<std::int64_t>(
        decode_workspace_floats(p.num_seqs, c.num_heads, c.head_dim, plan), 1);
    const Buffer partial_out(static_cast<std::size_t>(floats) * sizeof(float));
    const Buffer partial_lse(static_cast<std::size_t>(floats / c.head_dim + 1) * sizeof(float));
    out_.poison();
    const Status s = launch_paged_decode_attention(p, plan,
                                                   {.partial_out = partial_out.as<float>(),
                                                    .partial_lse = partial_lse.as<float>(),
                                                    .capacity_floats = floats},
                                                   kernel, nullptr);
    if (s.ok()) *out = out_.to_floats(type_);
    return s;
  }

  const HostAttentionBatch& host() const { return host_; }

 private:
  HostAttentionBatch host_;
  ScalarType type_;
  Buffer q_, k_, v_, out_;
  Buffer query_start_loc_, seq_lens_, block_tables_;
};

std::string kernel_name(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::kRegisters: return "registers";
    case DecodeKernel::kPipelined: return "pipelined";
    case DecodeKernel::kTensorCores: return "tensor-cores";
    case DecodeKernel::kTensorCoresDirect: return "tensor-cores-direct";
    case DecodeKernel::kAuto: break;
  }
  return "auto";
}

std::string plan_name(const DecodeSplitPlan& plan) {
  return " splits " + std::to_string(plan.num_splits) + " x " +
         std::to_string(plan.partition_size) +
         (plan.device_partition_size != nullptr ? " (device partition)" : "");
}

// One split; the planner's whole-tile partitions for `splits`; and 100-key partitions, whose
// splits start mid-tile.
std::vector<DecodeSplitPlan> plans_for(std::int64_t longest, int splits) {
  const int len = static_cast<int>(longest);
  return {{.num_splits = 1, .partition_size = len},
          decode_plan_with_splits(longest, splits),
          {.num_splits = (len + 99) / 100, .partition_size = 100}};
}

// Runs `kernel` and checks it against the oracle within `tolerance`; returns the output.
std::vector<float> check_decode(EmulatedBatch& batch, const DecodeSplitPlan& plan,
                                DecodeKernel kernel, double tolerance, const std::string& what) {
  const std::string label = what + " " + kernel_name(kernel) + plan_name(plan);
  std::vector<float> out;
  const Status s = batch.run_decode(plan, kernel, &out);
  EXPECT_TRUE(s.ok()) << label << ": " << s.to_string();
  if (!s.ok()) return out;
  const double error = batch.host().worst_error(out, batch.host().want(), label);
  EXPECT_LE(error, tolerance) << label;
  return out;
}

// kAuto (the executor's choice) runs `expected`'s kernel, bit for bit, unless
// PAGODA_DECODE_ATTENTION names another.
void expect_auto_picks(EmulatedBatch& batch, const DecodeSplitPlan& plan,
                       const std::vector<float>& expected, const std::string& what) {
  const char* env = std::getenv("PAGODA_DECODE_ATTENTION");
  if (env != nullptr && *env != '\0' && std::string_view(env) != "auto") return;
  std::vector<float> chosen;
  ASSERT_TRUE(batch.run_decode(plan, DecodeKernel::kAuto, &chosen).ok()) << what;
  ASSERT_EQ(chosen.size(), expected.size()) << what;
  EXPECT_EQ(std::memcmp(chosen.data(), expected.data(), chosen.size() * sizeof(float)), 0)
      << what << plan_name(plan) << ": kAuto is not the kernel it should pick";
}

constexpr ScalarType kHalfTypes[] = {ScalarType::kBF16, ScalarType::kF16};

// Priority 1: the tensor-core kernel over an FP8 cache, codes converted to 16-bit tiles in
// shared memory and the direct variant (B fragments built from the codes, an f16 mma). Both
// within the 16-bit bound over the oracle of code x scale (fp8_kv_cache_test.cc's 3u).
TEST(EmulatedDecodeAttention, TensorCoresOverFp8CacheMatchOracle) {
  std::mt19937 rng(82);
  const std::vector<AttentionCase> cases = {
      {{{1, 1}, {1, 17}, {1, 100}}, 128, 8, 2, 16},  // group 4
      {{{1, 1000}}, 128, 8, 1, 24},                  // group 8, pages 16-key tiles straddle
      {{{1, 301}, {1, 16}}, 64, 16, 2, 16},          // head_dim 64
      {{{1, 230}, {1, 40}}, 128, 4, 1, 16, 100},     // a window; tiles cross its start
  };
  const Fp8Scales scales{.k = 0.01f, .v = 0.005f};  // x / scale spans e4m3's range
  for (ScalarType type : kHalfTypes) {
    const double tolerance = 3.0 * gpu_test::unit_roundoff(type) + 2e-5;
    for (const AttentionCase& c : cases) {
      EmulatedBatch batch(c, type, rng, scales);
      const std::string what = gpu_test::describe(c, type) + " fp8";
      for (const DecodeSplitPlan& plan : plans_for(batch.host().max_seq_len(), 4)) {
        const std::vector<float> converted =
            check_decode(batch, plan, DecodeKernel::kTensorCores, tolerance, what);
        const std::vector<float> direct =
            check_decode(batch, plan, DecodeKernel::kTensorCoresDirect, tolerance, what);
        // The two variants round q and P differently (f16 against the dtype), so they differ
        // by bits at bf16; at f16 only the order of the fp32 sums is left.
        if (type == ScalarType::kF16 && !converted.empty() && !direct.empty()) {
          EXPECT_LE(gpu_test::compare(direct, converted).relative_l2, 1e-3) << what;
        }
        if (plan.num_splits == 1) expect_auto_picks(batch, plan, converted, what);
      }
    }
  }
}

// Priority 2: the tensor-core kernel over a 16-bit cache with one and many splits, through the
// merge kernel: the planner's partitions, 16-key ones (one tile per split), 100-key ones, and
// the partition read from device memory as a CUDA graph's replays do.
TEST(EmulatedDecodeAttention, TensorCoresOver16BitCacheWithSplitsMatchOracle) {
  std::mt19937 rng(11);
  const std::vector<AttentionCase> cases = {
      {{{1, 1}, {1, 15}, {1, 16}, {1, 17}}, 128, 16, 4, 16},  // group 4
      {{{1, 1100}, {1, 33}}, 128, 8, 1, 24},                  // group 8, straddled pages
      {{{1, 130}, {1, 2}}, 64, 16, 1, 16},                    // group 16: two chunks of 8
      {{{1, 230}, {1, 40}}, 128, 8, 2, 16, 100},              // a sliding window of 100
  };
  for (ScalarType type : kHalfTypes) {
    const double tolerance = 3.0 * gpu_test::unit_roundoff(type) + 2e-5;
    for (const AttentionCase& c : cases) {
      EmulatedBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type);
      const std::int64_t longest = batch.host().max_seq_len();
      std::vector<DecodeSplitPlan> plans = plans_for(longest, 8);
      if (type == ScalarType::kBF16) {
        plans.push_back(
            {.num_splits = static_cast<int>((longest + 15) / 16), .partition_size = 16});
      }
      for (const DecodeSplitPlan& plan : plans) {
        const std::vector<float> out =
            check_decode(batch, plan, DecodeKernel::kTensorCores, tolerance, what);
        if (plan.num_splits == 1) expect_auto_picks(batch, plan, out, what);
      }
      // A graph's fixed grid: more splits than the partition needs, the partition from memory.
      const Buffer partition(std::vector<std::int32_t>{64});
      const DecodeSplitPlan device_plan{.num_splits = static_cast<int>((longest + 63) / 64) + 2,
                                        .partition_size = 1,
                                        .device_partition_size = partition.as<std::int32_t>()};
      check_decode(batch, device_plan, DecodeKernel::kTensorCores, tolerance, what);
    }
  }
}

// A mixed step's decode subset (decode_seq_ids): only those sequences' rows are written, each
// against the oracle, with the partials laid out by place in the subset.
TEST(EmulatedDecodeAttention, DecodeSubsetWritesOnlyItsSequences) {
  std::mt19937 rng(12);
  const AttentionCase c{{{1, 500}, {1, 33}, {1, 1}, {1, 90}}, 128, 8, 2, 16};
  EmulatedBatch batch(c, ScalarType::kBF16, rng);
  const std::vector<std::int32_t> subset = {3, 0};
  const double tolerance = 3.0 * gpu_test::unit_roundoff(ScalarType::kBF16) + 2e-5;
  const std::int64_t row = c.num_heads * c.head_dim;
  for (const DecodeSplitPlan& plan : plans_for(500, 4)) {
    std::vector<float> out;
    ASSERT_TRUE(batch.run_decode(plan, DecodeKernel::kTensorCores, &out, subset).ok());
    for (std::int32_t s = 0; s < static_cast<std::int32_t>(c.seqs.size()); ++s) {
      const std::vector<float> got(out.begin() + s * row, out.begin() + (s + 1) * row);
      const bool decoded = std::find(subset.begin(), subset.end(), s) != subset.end();
      if (!decoded) {
        EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float x) { return std::isnan(x); }))
            << "seq " << s << " is not in the subset but was written" << plan_name(plan);
        continue;
      }
      const std::vector<float> want(batch.host().want().begin() + s * row,
                                    batch.host().want().begin() + (s + 1) * row);
      const gpu_test::Comparison cmp = gpu_test::compare(got, want);
      EXPECT_EQ(cmp.num_nan, 0u) << "seq " << s << plan_name(plan);
      EXPECT_LE(cmp.relative_l2, tolerance) << "seq " << s << plan_name(plan);
    }
  }
}

// Priority 3: the CUDA-core kernels (registers, pipelined) over 16-bit and FP8 caches: the
// 2u bound, and the two bit for bit (they differ only in how K/V bytes reach the registers).
TEST(EmulatedDecodeAttention, CudaCoreKernelsMatchOracleAndEachOther) {
  std::mt19937 rng(13);
  const std::vector<AttentionCase> cases = {
      {{{1, 1}, {1, 17}, {1, 300}}, 128, 8, 2, 16},  // group 4
      {{{1, 1000}}, 64, 8, 1, 24},                   // group 8, head_dim 64
  };
  for (ScalarType type : kHalfTypes) {
    const double tolerance = 2.0 * gpu_test::unit_roundoff(type) + 2e-5;
    for (const std::optional<Fp8Scales> fp8 :
         {std::optional<Fp8Scales>{}, std::optional<Fp8Scales>{{.k = 0.01f, .v = 0.005f}}}) {
      for (const AttentionCase& c : cases) {
        EmulatedBatch batch(c, type, rng, fp8);
        const std::string what = gpu_test::describe(c, type) + (fp8 ? " fp8" : "");
        const std::int64_t longest = batch.host().max_seq_len();
        for (const DecodeSplitPlan& plan :
             {DecodeSplitPlan{.num_splits = 1, .partition_size = static_cast<int>(longest)},
              decode_plan_with_splits(longest, 4)}) {
          const std::vector<float> registers =
              check_decode(batch, plan, DecodeKernel::kRegisters, tolerance, what);
          const std::vector<float> pipelined =
              check_decode(batch, plan, DecodeKernel::kPipelined, tolerance, what);
          ASSERT_EQ(registers.size(), pipelined.size());
          EXPECT_EQ(std::memcmp(registers.data(), pipelined.data(), registers.size() * 4), 0)
              << what << plan_name(plan) << ": the two decode kernels differ";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::kernels
