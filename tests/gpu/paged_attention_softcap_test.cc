// The attention logit soft-cap (PagedAttentionParams::logit_softcap: scores = cap * tanh(scores /
// cap), Gemma 2's attn_logit_softcapping) in every kernel the dispatch can pick, against the CPU
// oracle with the same cap (cpu::windowed_attention_reference, in double): the CUDA-core and
// tensor-core prefill tiles, the register, pipelined and tensor-core decode kernels with one and
// many splits, mixed batches, windows at head_dim 256, an FP8 cache.
//
// Caps of 1.5 to 3 against scores of a few units (q uniform(-4, 4), K in (-1, 1)) change every
// row; 30 barely. tanh has a derivative <= 1, so the kernels' errors are not amplified: the
// tolerances are those of paged_attention_test.cc (2u + 2e-5 for fp32 P, 3u with P rounded to
// the dtype, 4u over FP8 codes in the tensor-core tiles).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/gpu/attention_test_batch.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionBatch;
using gpu_test::AttentionCase;
using kernels::DecodeKernel;
using kernels::PrefillKernel;

std::string kernel_name(PrefillKernel k) {
  return " prefill kernel " + std::to_string(static_cast<int>(k));
}
std::string kernel_name(DecodeKernel k) {
  return " decode kernel " + std::to_string(static_cast<int>(k));
}

// The oracle with a cap differs from the one without (the cases' caps matter).
TEST(GpuPagedAttentionSoftCap, TheCapChangesTheOracle) {
  PAGODA_SKIP_WITHOUT_GPU();  // AttentionBatch uploads its arrays
  AttentionCase c{{{9, 30}, {1, 50}}, 64, 4, 2, 16};
  std::mt19937 rng_a(5), rng_b(5);
  AttentionBatch plain(c, ScalarType::kF32, rng_a);
  c.logit_softcap = 3.0f;
  AttentionBatch capped(c, ScalarType::kF32, rng_b);
  EXPECT_GT(gpu_test::compare(capped.want(), plain.want()).relative_l2, 1e-2);
}

TEST(GpuPagedAttentionSoftCap, PrefillKernelsMatchCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(90);
  // The emulation's: the same features at fewer heads, queries and keys.
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64, 0, 1.5f},
          {{{15, 15}, {64, 200}}, 128, 8, 2, 16, 0, 2.0f},
          {{{513, 513}, {3, 16}}, 128, 32, 8, 16, 0, 2.0f},  // 512+ queries: kAuto's long tile
          {{{600, 600}}, 64, 8, 2, 64, 0, 30.0f},
          {{{40, 300}, {70, 70}}, 256, 4, 1, 16, 12, 2.5f},  // Gemma 3: head_dim 256, a window
      },
      {
          {{{150, 150}}, 64, 4, 2, 64, 0, 30.0f},
          {{{1, 1}, {17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64, 0, 1.5f},
          {{{513, 513}}, 128, 1, 1, 16, 0, 2.0f},
          {{{15, 15}, {64, 200}}, 128, 4, 2, 16, 0, 2.0f},
          {{{40, 200}, {70, 70}}, 256, 2, 1, 16, 12, 2.5f},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type);
      std::vector<PrefillKernel> kernels = {PrefillKernel::kAuto, PrefillKernel::kReference};
      if (type != ScalarType::kF32) {
        kernels.push_back(PrefillKernel::kMma16);
        if (c.head_dim != 256) kernels.push_back(PrefillKernel::kMma32);
        if (c.head_dim == 64) kernels.push_back(PrefillKernel::kMma32Keys64);
      }
      for (const PrefillKernel kernel : kernels) {
        std::vector<float> out;
        const Status s = batch.run_prefill(kernel, &out);
        ASSERT_TRUE(s.ok()) << what << kernel_name(kernel) << ": " << s.to_string();
        const bool fp32_p = type == ScalarType::kF32 || kernel == PrefillKernel::kReference ||
                            (kernel == PrefillKernel::kAuto && c.head_dim == 256);
        EXPECT_LE(batch.worst_error(out, batch.want(), what + kernel_name(kernel)),
                  (fp32_p ? 2.0 : 3.0) * u + 2e-5)
            << what << kernel_name(kernel);
      }
      // The 128 x 64 tile at head_dim 128 has no soft-cap (its registers): refused, not wrong.
      if (type != ScalarType::kF32 && c.head_dim == 128) {
        std::vector<float> out;
        EXPECT_EQ(batch.run_prefill(PrefillKernel::kMma32Keys64, &out).code(),
                  StatusCode::kUnimplemented)
            << what;
      }
    }
  }
}

TEST(GpuPagedAttentionSoftCap, DecodeKernelsMatchCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(91);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {1, 17}, {1, 600}}, 128, 32, 8, 16, 0, 1.5f},
          {{{1, 1000}, {1, 33}, {1, 16}}, 128, 32, 8, 24, 0, 2.0f},  // pages 16-key tiles straddle
          {{{1, 4097}}, 64, 8, 1, 64, 0, 30.0f},
          {{{1, 513}, {1, 2}}, 128, 16, 1, 16, 0, 3.0f},    // group 16: two chunks of 8 q heads
          {{{1, 700}, {1, 40}}, 256, 8, 2, 16, 100, 2.5f},  // Gemma 3: head_dim 256, a window
      },
      {
          {{{1, 700}}, 64, 8, 1, 64, 0, 30.0f},
          {{{1, 1}, {1, 17}, {1, 200}}, 128, 8, 2, 16, 0, 1.5f},
          {{{1, 130}, {1, 2}}, 128, 16, 1, 16, 0, 3.0f},
          {{{1, 230}, {1, 40}}, 256, 4, 1, 16, 100, 2.5f},
          {{{1, 300}, {1, 33}, {1, 16}}, 128, 8, 1, 24, 0, 2.0f},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type);
      const auto longest = static_cast<int>(batch.max_seq_len());
      std::vector<DecodeKernel> kernels = {DecodeKernel::kRegisters, DecodeKernel::kPipelined};
      if (type != ScalarType::kF32 && c.head_dim != 256) {
        kernels.push_back(DecodeKernel::kTensorCores);
      }
      for (const kernels::DecodeSplitPlan plan :
           {kernels::DecodeSplitPlan{.num_splits = 1, .partition_size = longest},
            kernels::DecodeSplitPlan{.num_splits = (longest + 99) / 100, .partition_size = 100}}) {
        std::vector<float> registers;
        for (const DecodeKernel kernel : kernels) {
          std::vector<float> out;
          const std::string label =
              what + kernel_name(kernel) + " splits " + std::to_string(plan.num_splits);
          const Status s = batch.run_decode(plan, &out, kernel);
          ASSERT_TRUE(s.ok()) << label << ": " << s.to_string();
          const double tolerance = (kernel == DecodeKernel::kTensorCores ? 3.0 : 2.0) * u + 2e-5;
          EXPECT_LE(batch.worst_error(out, batch.want(), label), tolerance) << label;
          // The register and pipelined kernels share every instruction of the arithmetic.
          if (kernel == DecodeKernel::kRegisters) registers = out;
          if (kernel == DecodeKernel::kPipelined) {
            ASSERT_EQ(out.size(), registers.size());
            EXPECT_EQ(std::memcmp(out.data(), registers.data(), out.size() * sizeof(float)), 0)
                << label << ": the register and pipelined kernels differ";
          }
        }
      }
    }
  }
}

// Mixed batches (the executor's mixed steps): the prefill kernel skipping one-query sequences,
// the decode kernel running them, both with the cap.
TEST(GpuPagedAttentionSoftCap, MixedBatchMatchesCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(92);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 500}, {37, 37}, {1, 33}, {300, 1000}, {1, 1}}, 128, 32, 8, 16, 0, 2.0f},
          {{{1, 700}, {20, 120}, {1, 40}}, 256, 8, 2, 16, 100, 2.5f},
      },
      {
          {{{1, 230}, {20, 120}, {1, 40}}, 256, 4, 1, 16, 100, 2.5f},
          {{{1, 200}, {37, 37}, {1, 33}, {70, 300}, {1, 1}}, 128, 8, 2, 16, 0, 2.0f},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type) + " mixed";
      for (const int partition : {100000, 128}) {
        std::vector<float> out;
        const Status s =
            batch.run_mixed(PrefillKernel::kAuto, DecodeKernel::kPipelined, partition, &out);
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
        EXPECT_LE(batch.worst_error(out, batch.want(), what), 3.0 * u + 2e-5)
            << what << " partition " << partition;
      }
    }
  }
}

// Over an FP8 cache: the decode kernels' codes (k_scale folded into q's scale, so the cap is
// applied to true scores) and the tensor-core tiles' codes converted in shared memory.
TEST(GpuPagedAttentionSoftCap, Fp8CacheMatchesCpuOracle) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(93);
  const gpu_test::Fp8Scales scales{.k = 0.01f, .v = 0.005f};
  for (const ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    const double u = gpu_test::unit_roundoff(type);
    {
      const AttentionCase c = gpu_test::kEmulated
                                  ? AttentionCase{{{1, 17}, {1, 200}}, 128, 8, 2, 16, 0, 2.0f}
                                  : AttentionCase{{{1, 17}, {1, 600}}, 128, 32, 8, 16, 0, 2.0f};
      AttentionBatch batch(c, type, rng, 0, scales);
      const std::string what = gpu_test::describe(c, type) + " fp8";
      // The tensor-core kernels fold k_scale into the cap's units and round P: 3u.
      for (const DecodeKernel kernel :
           {DecodeKernel::kRegisters, DecodeKernel::kPipelined, DecodeKernel::kTensorCores,
            DecodeKernel::kTensorCoresDirect}) {
        std::vector<float> out;
        const Status s = batch.run_decode({.num_splits = 6, .partition_size = 100}, &out, kernel);
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
        EXPECT_LE(batch.worst_error(out, batch.want(), what + kernel_name(kernel)),
                  (kernel >= DecodeKernel::kTensorCores ? 3.0 : 2.0) * u + 2e-5)
            << what << kernel_name(kernel);
      }
    }
    {
      const AttentionCase c = gpu_test::kEmulated
                                  ? AttentionCase{{{17, 17}, {64, 200}}, 128, 4, 2, 16, 0, 2.0f}
                                  : AttentionCase{{{17, 17}, {64, 300}}, 128, 8, 2, 16, 0, 2.0f};
      AttentionBatch batch(c, type, rng, 0, scales);
      const std::string what = gpu_test::describe(c, type) + " fp8";
      for (const PrefillKernel kernel :
           {PrefillKernel::kReference, PrefillKernel::kMma16, PrefillKernel::kMma32}) {
        std::vector<float> out;
        const Status s = batch.run_prefill(kernel, &out);
        ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
        EXPECT_LE(batch.worst_error(out, batch.want(), what + kernel_name(kernel)),
                  (kernel == PrefillKernel::kReference ? 3.0 : 4.0) * u + 2e-5)
            << what << kernel_name(kernel);
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
