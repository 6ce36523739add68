// The FP8 KV cache's kernels (kernels::KvCacheStorage::kFp8E4M3, --kv-cache-dtype fp8); the
// executor's side is fp8_kv_cache_test.cc:
//
// - RoPE + KV append stores e4m3(x / scale) of the values it stores into a 16-bit cache, code
//   for code against the host's rounding rule (quant::float_to_fp8_e4m3: nearest even,
//   saturated to +-448), leaves q exactly as the 16-bit run does, and writes nothing else;
// - decode (both CUDA-core kernels) and prefill attention over FP8 codes against the CPU oracle
//   over code * scale. The codes are what the kernels read, so the tolerance is the 16-bit one
//   (2u + 2e-5 for decode; 3u for prefill, as the other attention tests); the two decode kernels
//   agree bit for bit; the tensor-core prefill tiles (codes converted in shared memory) within
//   4u; the tensor-core decode kernel (both variants) within 3u, and none at head_dim 256.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/rope.h"
#include "kernels/rope/rope_kv_cache.h"
#include "quant/float_codes.h"
#include "tests/gpu/attention_test_batch.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionBatch;
using gpu_test::AttentionCase;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;
using gpu_test::Fp8Scales;

constexpr ScalarType kHalfTypes[] = {ScalarType::kF16, ScalarType::kBF16};

struct RopeCase {
  std::int64_t head_dim, num_heads, num_kv_heads, block_size;
  kernels::RopeStyle style;
  std::int64_t tokens;
  Fp8Scales scales;
};

TEST(GpuFp8KvCache, RopeAppendStoresTheCodesOfWhatA16BitCacheHolds) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(81);
  const RopeCase cases[] = {
      {128, 32, 8, 16, kernels::RopeStyle::kRotateHalf, 37, {0.05f, 0.02f}},
      {64, 8, 2, 64, kernels::RopeStyle::kAdjacentPairs, 70, {1.0f, 1.0f}},
      // |x| / scale up to 1000: codes saturate at +-448.
      {64, 4, 4, 16, kernels::RopeStyle::kRotateHalf, 9, {0.001f, 0.0015f}},
      {20, 2, 1, 8, kernels::RopeStyle::kAdjacentPairs, 13, {0.5f, 0.25f}},  // scalar path
      // 8192+ tokens: CTAs of several tokens (fewer heads on the emulation).
      {128,
       gpu_test::kEmulated ? 2 : 16,
       gpu_test::kEmulated ? 1 : 8,
       16,
       kernels::RopeStyle::kRotateHalf,
       8200,
       {0.03f, 0.04f}},
  };
  for (ScalarType type : kHalfTypes) {
    for (const RopeCase& rc : cases) {
      const std::int64_t d = rc.head_dim, tokens = rc.tokens;
      const std::int64_t num_blocks = (tokens + tokens / 4) / rc.block_size + 2;
      const std::int64_t stride = (rc.num_heads + 2 * rc.num_kv_heads) * d;
      const auto qkv = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(tokens * stride), rng), type);
      std::vector<std::int32_t> positions(static_cast<std::size_t>(tokens));
      for (auto& p : positions) p = static_cast<std::int32_t>(rng() % 8193);
      std::vector<std::int64_t> slots(static_cast<std::size_t>(num_blocks * rc.block_size));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<std::size_t>(tokens));
      slots[3] = -1;  // padding stores nothing
      const std::vector<float> inv_freq = cpu::rope_inv_freq(d, 500000.0, cpu::RopeScaling{});
      const auto cache_elems =
          static_cast<std::size_t>(num_blocks * rc.num_kv_heads * rc.block_size * d);

      DeviceVector<std::int32_t> d_positions(positions);
      DeviceVector<std::int64_t> d_slots(slots);
      DeviceVector<float> d_inv_freq(inv_freq);
      // The same step twice: into a 16-bit cache, and into an FP8 one (0x7f, NaN, everywhere
      // before: untouched codes show).
      DeviceArray qkv16(qkv, type), qkv8(qkv, type);
      DeviceArray k16(cache_elems, type), v16(cache_elems, type);
      DeviceVector<std::uint8_t> k8(std::vector<std::uint8_t>(cache_elems, 0x7f));
      DeviceVector<std::uint8_t> v8(std::vector<std::uint8_t>(cache_elems, 0x7f));
      const auto params = [&](DeviceArray& q, void* k, void* v, bool fp8) {
        return kernels::RopeKvCacheParams{
            .qkv = q.data(),
            .qkv_row_stride = stride,
            .positions = d_positions.data(),
            .slot_mapping = d_slots.data(),
            .inv_freq = d_inv_freq.data(),
            .cache = {.k = k,
                      .v = v,
                      .num_blocks = num_blocks,
                      .block_size = rc.block_size,
                      .num_kv_heads = rc.num_kv_heads,
                      .head_dim = d,
                      .storage = fp8 ? kernels::KvCacheStorage::kFp8E4M3
                                     : kernels::KvCacheStorage::kActivations,
                      .k_scale = rc.scales.k,
                      .v_scale = rc.scales.v},
            .num_tokens = tokens,
            .num_heads = rc.num_heads,
            .style = rc.style,
            .dtype = type};
      };
      ASSERT_TRUE(
          kernels::launch_rope_kv_cache(params(qkv16, k16.data(), v16.data(), false), nullptr)
              .ok());
      ASSERT_TRUE(
          kernels::launch_rope_kv_cache(params(qkv8, k8.data(), v8.data(), true), nullptr).ok());
      const std::string what = std::string(gpu_test::name_of(type)) + " d" + std::to_string(d) +
                               " tokens " + std::to_string(tokens);
      EXPECT_EQ(qkv8.download(), qkv16.download()) << what << ": q (and the row) differ";

      const std::vector<float> want_k = k16.download(), want_v = v16.download();
      const std::vector<std::uint8_t> got_k = k8.download(), got_v = v8.download();
      std::vector<bool> written(cache_elems, false);
      std::size_t mismatches = 0, saturated = 0;
      for (std::int64_t t = 0; t < tokens; ++t) {
        if (slots[t] < 0) continue;
        const std::int64_t block = slots[t] / rc.block_size, offset = slots[t] % rc.block_size;
        for (std::int64_t h = 0; h < rc.num_kv_heads; ++h) {
          for (std::int64_t e = 0; e < d; ++e) {
            const auto i = static_cast<std::size_t>(
                ((block * rc.num_kv_heads + h) * rc.block_size + offset) * d + e);
            written[i] = true;
            const std::uint8_t k_code = quant::float_to_fp8_e4m3(want_k[i] / rc.scales.k);
            const std::uint8_t v_code = quant::float_to_fp8_e4m3(want_v[i] / rc.scales.v);
            mismatches += (got_k[i] != k_code) + (got_v[i] != v_code);
            saturated += (k_code & 0x7f) == 0x7e;
          }
        }
      }
      EXPECT_EQ(mismatches, 0u) << what << ": codes differ from the host's rounding";
      if (rc.scales.k < 0.01f) {
        EXPECT_GT(saturated, 0u) << what << ": no code saturated";
      }
      std::size_t stray = 0;
      for (std::size_t i = 0; i < cache_elems; ++i) {
        if (!written[i]) stray += (got_k[i] != 0x7f) + (got_v[i] != 0x7f);
      }
      EXPECT_EQ(stray, 0u) << what << ": codes written outside the mapped slots";
    }
  }
}

TEST(GpuFp8KvCache, AttentionOverCodesMatchesTheOracleOverTheirValues) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(82);
  // The emulation's: the same features at fewer heads, queries and keys.
  const std::vector<AttentionCase> decode_cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {1, 17}, {1, 600}}, 128, 32, 8, 16},
          {{{1, 4097}, {1, 33}}, 64, 8, 1, 64},
          {{{1, 513}, {1, 2}}, 128, 16, 1, 24},
          {{{1, 900}}, 256, 4, 1, 16, 300},           // Gemma 3's head_dim and a window
          {{{1, 700}, {1, 40}}, 128, 8, 2, 16, 100},  // a window; 16-key tiles cross its start
          {{{1, 301}}, 64, 12, 2, 64, 37},            // group 6, window not a multiple of 16
      },
      {
          {{{1, 1}, {1, 17}, {1, 200}}, 128, 8, 2, 16},
          {{{1, 400}, {1, 33}}, 64, 8, 1, 64},
          {{{1, 130}, {1, 2}}, 128, 16, 1, 24},
          {{{1, 400}}, 256, 4, 1, 16, 300},
          {{{1, 230}, {1, 40}}, 128, 4, 1, 16, 100},
          {{{1, 301}}, 64, 6, 1, 64, 37},
      });
  const std::vector<AttentionCase> prefill_cases = gpu_test::pick<AttentionCase>(
      {
          {{{17, 17}, {1, 40}, {64, 300}}, 128, 8, 2, 16},
          {{{100, 1000}}, 64, 8, 8, 64},
          {{{600, 600}, {33, 700}}, 128, 32, 8, 24},  // 512+ queries, pages tiles straddle
      },
      {
          {{{17, 17}, {1, 40}, {64, 200}}, 128, 4, 2, 16},
          {{{100, 400}}, 64, 2, 2, 64},
          {{{200, 200}, {33, 100}}, 128, 2, 1, 24},
      });
  const Fp8Scales scales{.k = 0.01f, .v = 0.005f};  // x / scale spans e4m3's range
  for (ScalarType type : kHalfTypes) {
    const double u = gpu_test::unit_roundoff(type);
    for (const AttentionCase& c : gpu_test::cases_in(kHalfTypes, type, decode_cases)) {
      AttentionBatch batch(c, type, rng, 0, scales);
      const std::string what = gpu_test::describe(c, type) + " fp8";
      const auto longest = static_cast<int>(batch.max_seq_len());
      for (const kernels::DecodeSplitPlan plan :
           {kernels::DecodeSplitPlan{.num_splits = 1, .partition_size = longest},
            kernels::decode_plan_with_splits(longest, 4),
            kernels::DecodeSplitPlan{.num_splits = (longest + 99) / 100, .partition_size = 100}}) {
        std::vector<float> registers, pipelined;
        ASSERT_TRUE(batch.run_decode(plan, &registers, kernels::DecodeKernel::kRegisters).ok());
        ASSERT_TRUE(batch.run_decode(plan, &pipelined, kernels::DecodeKernel::kPipelined).ok());
        const std::string label = what + " splits " + std::to_string(plan.num_splits);
        gpu_test::expect_close(registers, batch.want(), 2.0 * u + 2e-5, label);
        ASSERT_EQ(registers.size(), pipelined.size());
        EXPECT_EQ(std::memcmp(registers.data(), pipelined.data(), registers.size() * 4), 0)
            << label << ": the two decode kernels differ";
        // The tensor-core kernel: codes to 16-bit values exactly, the scales on the fp32
        // scores and outputs, P rounded to the dtype as over a 16-bit cache: 3u. It has no
        // head_dim 256 instance.
        std::vector<float> tensor_cores;
        const Status tc =
            batch.run_decode(plan, &tensor_cores, kernels::DecodeKernel::kTensorCores);
        if (c.head_dim == 256) {
          EXPECT_EQ(tc.code(), StatusCode::kUnimplemented) << label;
        } else {
          ASSERT_TRUE(tc.ok()) << label << ": " << tc.to_string();
          gpu_test::expect_close(tensor_cores, batch.want(), 3.0 * u + 2e-5,
                                 label + " (tensor cores)");
          // The direct variant: B fragments from the codes, the mma in f16 (q rounded to f16,
          // exact for these values; P rounded to f16, finer than bf16): the same 3u.
          std::vector<float> direct;
          const Status d =
              batch.run_decode(plan, &direct, kernels::DecodeKernel::kTensorCoresDirect);
          ASSERT_TRUE(d.ok()) << label << ": " << d.to_string();
          gpu_test::expect_close(direct, batch.want(), 3.0 * u + 2e-5,
                                 label + " (tensor cores, direct)");
          // The two variants round q and P differently (f16 against the dtype), so they differ
          // by bits at bf16; at f16 only the order of the fp32 sums is left.
          if (type == ScalarType::kF16) {
            EXPECT_LE(gpu_test::compare(direct, tensor_cores).relative_l2, 1e-3)
                << label << ": the two tensor-core variants differ";
          }
        }
        // kAuto (the executor's) takes the tensor-core kernel over an FP8 cache where it
        // applies (run 29), the pipelined one at head_dim 256.
        std::vector<float> chosen;
        ASSERT_TRUE(batch.run_decode(plan, &chosen, kernels::DecodeKernel::kAuto).ok());
        const std::vector<float>& expected = c.head_dim == 256 ? pipelined : tensor_cores;
        ASSERT_EQ(chosen.size(), expected.size());
        if (std::getenv("PAGODA_DECODE_ATTENTION") == nullptr) {
          EXPECT_EQ(std::memcmp(chosen.data(), expected.data(), chosen.size() * 4), 0)
              << label << ": kAuto is not the kernel it should pick";
        }
      }
    }
    for (const AttentionCase& c : gpu_test::cases_in(kHalfTypes, type, prefill_cases)) {
      AttentionBatch batch(c, type, rng, 0, scales);
      const std::string what = gpu_test::describe(c, type) + " fp8";
      std::vector<float> out;
      ASSERT_TRUE(batch.run_prefill(kernels::PrefillKernel::kReference, &out).ok());
      gpu_test::expect_close(out, batch.want(), 3.0 * u + 2e-5, what + " prefill reference");
      // The tensor-core tiles (kAuto's): code x scale rounded to the dtype in shared memory
      // (exact at scale 1, one more rounding here), P rounded as always: 4u.
      for (const auto kernel :
           {kernels::PrefillKernel::kAuto, kernels::PrefillKernel::kMma16,
            kernels::PrefillKernel::kMma32, kernels::PrefillKernel::kMma32Keys64}) {
        ASSERT_TRUE(batch.run_prefill(kernel, &out).ok());
        gpu_test::expect_close(out, batch.want(), 4.0 * u + 2e-5,
                               what + " prefill mma " + std::to_string(static_cast<int>(kernel)));
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
