// The tensor-core prefill attention (PrefillKernel::kMma16, kMma32 and kMma32Keys64, whose warps
// also skip the diagonal's key tiles that lie wholly past their rows) against the CPU oracle
// (cpu::paged_attention_reference, in double) and against the CUDA-core reference kernel, on
// fresh random q/K/V with shuffled block tables and NaN-poisoned outputs, at the awkward sizes:
// query lengths 1, 15, 16, 17, 63, 64, 65, 511, 513, mixed lengths in one batch, cached prefixes
// (chunked prefill and prefix hits: a chunk's queries start after cached keys, at offsets that
// are and are not multiples of the 64-key tile), page sizes 8, 16, 64 and 24 (not a power of two),
// GQA ratios 1, 4 and 8, head dims 64, 128 and 256 (with sliding windows), bf16 and f16. Each
// sequence is compared on its own, so a wrong short sequence cannot hide behind a long one.
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

#include <cstdio>
#include <cstring>

#include "tests/gpu/attention_test_batch.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionBatch;
using gpu_test::AttentionCase;
using kernels::PrefillKernel;

constexpr ScalarType kHalfTypes[] = {ScalarType::kBF16, ScalarType::kF16};

TEST(GpuPagedPrefillMma, MatchesCpuOracleAndReferenceKernel) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(20);
  // The emulation's: the same features at fewer heads, queries and keys.
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}}, 64, 4, 4, 16},
          {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
          {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
          {{{63, 63}, {64, 64}, {65, 65}}, 128, 4, 4, 64},
          {{{511, 511}}, 128, 32, 8, 16},
          {{{513, 513}, {3, 16}}, 64, 32, 4, 64},
          // Cached prefixes: context 500 (not a tile multiple), 187, 64 and 0 in one batch.
          {{{100, 600}, {513, 700}, {64, 128}, {17, 17}}, 128, 32, 8, 16},
          {{{130, 1000}, {1, 77}}, 64, 4, 4, 64},
          {{{64, 4097}}, 128, 8, 1, 16},  // a late chunk of a long prompt (chunked prefill)
          {{{200, 333}, {31, 50}}, 128, 16, 2, 24},  // page size not a power of two
          {{{70, 90}, {129, 129}}, 64, 4, 2, 24},    // the same at d64
          {{{65, 130}, {7, 7}}, 128, 8, 8, 8},       // pages smaller than a copy pass (8 rows)
      },
      {
          {{{1, 1}}, 64, 4, 4, 16},
          {{{15, 15}, {16, 16}, {17, 17}}, 128, 8, 2, 16},
          {{{17, 17}, {1, 40}, {5, 100}}, 64, 8, 1, 64},
          {{{63, 63}, {64, 64}, {65, 65}}, 128, 4, 4, 64},
          {{{100, 400}, {130, 317}, {64, 128}, {17, 17}}, 128, 2, 1, 16},  // contexts 300, 187
          {{{130, 500}, {1, 77}}, 64, 2, 2, 64},
          {{{64, 400}}, 128, 2, 1, 16},
          {{{100, 233}, {31, 50}}, 128, 2, 1, 24},
          {{{70, 90}, {129, 129}}, 64, 4, 2, 24},
          {{{65, 130}, {7, 7}}, 128, 2, 2, 8},
      });
  for (ScalarType type : kHalfTypes) {
    const double u = gpu_test::unit_roundoff(type);
    const double tol_ref = 2 * u + 2e-5, tol_mma = 3 * u + 2e-5, tol_vs_ref = 5 * u + 4e-5;
    for (const AttentionCase& c : gpu_test::cases_in(kHalfTypes, type, cases)) {
      const std::string what = gpu_test::describe(c, type);
      AttentionBatch batch(c, type, rng);
      std::vector<float> ref;
      ASSERT_TRUE(batch.run_prefill(PrefillKernel::kReference, &ref).ok()) << what;
      const double ref_err = batch.worst_error(ref, batch.want(), what + " reference");
      EXPECT_LE(ref_err, tol_ref) << what << " reference";
      for (PrefillKernel kernel :
           {PrefillKernel::kMma16, PrefillKernel::kMma32, PrefillKernel::kMma32Keys64}) {
        const char* name = kernel == PrefillKernel::kMma16   ? "mma16"
                           : kernel == PrefillKernel::kMma32 ? "mma32"
                                                             : "mma32x64";
        std::vector<float> got, again;
        const Status s = batch.run_prefill(kernel, &got);
        ASSERT_TRUE(s.ok()) << what << " " << name << ": " << s.to_string();
        const double err = batch.worst_error(got, batch.want(), what + " " + name);
        const double vs_ref = batch.worst_error(got, ref, what + " " + name + " vs reference");
        EXPECT_LE(err, tol_mma) << what << " " << name;
        EXPECT_LE(vs_ref, tol_vs_ref) << what << " " << name << " vs reference";
        // Same inputs, same bits: a difference would be a race. (The emulation draws the same
        // thread order for both runs: nothing to see there.)
        if (!gpu_test::kEmulated) {
          ASSERT_TRUE(batch.run_prefill(kernel, &again).ok());
          EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float)))
              << what << " " << name << ": two runs differ";
        }
        std::printf("[prefill mma] %-70s %s: err %.2e (ref kernel %.2e, tol %.2e), vs ref %.2e\n",
                    what.c_str(), name, err, ref_err, tol_mma, vs_ref);
      }
    }
  }
}

// Gemma 3's shapes: head_dim 256 (16 rows a warp, 32-key tiles, Q re-read from shared memory)
// with and without a sliding window, whose tiles wholly before a warp's window are skipped and
// whose rows can see no key of their first tiles. Against the oracle (3u) and the reference
// kernel (5u), twice for the same bits.
TEST(GpuPagedPrefillMma, HeadDim256AndSlidingWindows) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(22);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {17, 17}, {65, 65}}, 256, 4, 1, 16},
          {{{100, 600}, {513, 513}}, 256, 8, 2, 16},
          {{{300, 300}, {40, 1000}}, 256, 4, 1, 16, 12},   // a window smaller than a key tile
          {{{200, 900}, {600, 600}}, 256, 8, 4, 24, 100},  // pages that tiles straddle
          {{{70, 70}, {1, 400}}, 256, 4, 4, 64, 512},      // windows longer than some sequences
      },
      {
          {{{1, 1}, {17, 17}, {65, 65}}, 256, 2, 1, 16},
          {{{100, 300}, {130, 130}}, 256, 2, 1, 16},
          {{{150, 150}, {40, 500}}, 256, 2, 1, 16, 12},
          {{{100, 400}, {140, 140}}, 256, 2, 2, 24, 100},
          {{{70, 70}, {1, 400}}, 256, 2, 2, 64, 512},
      });
  for (ScalarType type : kHalfTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(kHalfTypes, type, cases)) {
      const std::string what = gpu_test::describe(c, type);
      AttentionBatch batch(c, type, rng);
      std::vector<float> ref, got, again;
      ASSERT_TRUE(batch.run_prefill(PrefillKernel::kReference, &ref).ok()) << what;
      const Status s = batch.run_prefill(PrefillKernel::kMma16, &got);
      ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
      EXPECT_LE(batch.worst_error(got, batch.want(), what + " mma16"), 3 * u + 2e-5) << what;
      EXPECT_LE(batch.worst_error(got, ref, what + " mma16 vs reference"), 5 * u + 4e-5) << what;
      if (!gpu_test::kEmulated) {  // the same thread order twice there
        ASSERT_TRUE(batch.run_prefill(PrefillKernel::kMma16, &again).ok());
        EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float))) << what;
      }
      EXPECT_FALSE(batch.run_prefill(PrefillKernel::kMma32, &again).ok()) << what;
    }
  }
  // A window at head_dim 128 stays with the reference kernel.
  AttentionBatch d128({{{50, 90}}, 128, 8, 2, 16, 30}, ScalarType::kBF16, rng);
  std::vector<float> out;
  EXPECT_EQ(d128.run_prefill(PrefillKernel::kMma16, &out).code(), StatusCode::kUnimplemented);
}

TEST(GpuPagedPrefillMma, AutoDispatch) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(21);
  const AttentionCase c{{{37, 90}, {70, 70}}, 128, 8, 2, 16};
  {
    // bf16, aligned: kAuto is the tensor-core kernel, bit for bit.
    AttentionBatch batch(c, ScalarType::kBF16, rng);
    std::vector<float> a, b;
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kAuto, &a).ok());
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kMma16, &b).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  {
    // A long prompt (512+ queries) at d128: kAuto is 32 rows per warp with 64-key tiles
    // (kMma32Keys64), bit for bit.
    const AttentionCase long_prompt{
        {{520, 600}}, 128, gpu_test::kEmulated ? 2 : 8, gpu_test::kEmulated ? 1 : 2, 16};
    AttentionBatch batch(long_prompt, ScalarType::kBF16, rng);
    std::vector<float> a, b;
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kAuto, &a).ok());
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kMma32Keys64, &b).ok());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
    EXPECT_LE(batch.worst_error(a, batch.want(), "bf16 long auto"),
              3 * gpu_test::unit_roundoff(ScalarType::kBF16) + 2e-5);
  }
  {
    // f32: only the reference kernel applies.
    AttentionBatch batch(c, ScalarType::kF32, rng);
    std::vector<float> a;
    EXPECT_FALSE(batch.run_prefill(PrefillKernel::kMma16, &a).ok());
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kAuto, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "f32 auto"), 2 * 0x1p-24 + 2e-5);
  }
  {
    // A q row stride that breaks 16-byte alignment of q rows: kAuto falls back to the reference.
    AttentionBatch batch(c, ScalarType::kF16, rng, /*row_pad=*/4);
    std::vector<float> a;
    EXPECT_FALSE(batch.run_prefill(PrefillKernel::kMma32, &a).ok());
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kAuto, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "f16 padded auto"),
              2 * gpu_test::unit_roundoff(ScalarType::kF16) + 2e-5);
  }
  {
    // A padded but still aligned stride (8 elements) keeps the tensor-core kernel.
    AttentionBatch batch(c, ScalarType::kBF16, rng, /*row_pad=*/8);
    std::vector<float> a;
    ASSERT_TRUE(batch.run_prefill(PrefillKernel::kMma16, &a).ok());
    EXPECT_LE(batch.worst_error(a, batch.want(), "bf16 padded mma"),
              3 * gpu_test::unit_roundoff(ScalarType::kBF16) + 2e-5);
  }
}

}  // namespace
}  // namespace pagoda
