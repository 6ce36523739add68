#include "bench/cuda/attention_bench.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "bench/cuda/bench_util.h"
#include "bench/cuda/fp8_cache_codes.h"
#include "kernels/attention/paged_attention.h"

namespace pagoda::bench {

// The E4M3 codes of a bf16 K/V cache of `elems` elements each.
struct Fp8Cache {
  DeviceBuffer k, v;
  Fp8Cache(const DeviceBuffer& k16, const DeviceBuffer& v16, std::int64_t elems)
      : k(alloc(static_cast<std::size_t>(elems))), v(alloc(static_cast<std::size_t>(elems))) {
    check(e4m3_codes_of_bf16(k16.data(), k.as<std::uint8_t>(), elems), "fp8 cache");
    check(e4m3_codes_of_bf16(v16.data(), v.as<std::uint8_t>(), elems), "fp8 cache");
    check(cuda::cuda_status(cudaDeviceSynchronize(), "e4m3 codes"), "fp8 cache");
  }
};

// Llama-3-8B-shaped paged decode attention: 32 q / 8 kv heads, d 128, bf16, page 16.
// `sweep`: extra rows with these split counts forced, to check the planner's choice.
void bench_decode_attention(const Ceilings& ceil, int num_sms, std::int64_t batch,
                            std::int64_t context, const char* name, const char* goal,
                            std::vector<int> sweep) {
  const std::int64_t heads = 32, kv_heads = 8, d = 128, page = 16;
  const std::int64_t blocks_per_seq = (context + page - 1) / page;
  const std::int64_t num_blocks = batch * blocks_per_seq;
  const std::int64_t cache_elems = num_blocks * kv_heads * page * d;
  DeviceBuffer k = random_buffer(cache_elems, ScalarType::kBF16, 10);
  DeviceBuffer v = random_buffer(cache_elems, ScalarType::kBF16, 11);
  DeviceBuffer q = random_buffer(batch * heads * d, ScalarType::kBF16, 12);
  DeviceBuffer out = alloc(static_cast<std::size_t>(batch * heads * d) * 2);
  std::vector<std::int32_t> table(static_cast<std::size_t>(num_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  std::vector<std::int32_t> qsl(batch + 1), lens(batch, static_cast<std::int32_t>(context));
  std::iota(qsl.begin(), qsl.end(), 0);
  DeviceBuffer d_table = alloc(table.size() * 4), d_qsl = alloc(qsl.size() * 4),
               d_lens = alloc(lens.size() * 4);
  cudaMemcpy(d_table.data(), table.data(), table.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_qsl.data(), qsl.data(), qsl.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_lens.data(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice);
  const kernels::DecodeSplitPlan plan =
      kernels::plan_decode_splits(batch, kv_heads, heads, context, num_sms, 64);
  int most_splits = plan.num_splits;
  for (int s : sweep) most_splits = std::max(most_splits, s);
  const std::int64_t ws =
      std::max<std::int64_t>(kernels::decode_workspace_floats(
                                 batch, heads, d, {.num_splits = most_splits, .partition_size = 1}),
                             1);
  DeviceBuffer partial = alloc(static_cast<std::size_t>(ws) * 4);
  DeviceBuffer lse = alloc(static_cast<std::size_t>(ws / d + 1) * 4);
  const kernels::PagedAttentionParams p{.q = q.data(),
                                        .q_row_stride = heads * d,
                                        .out = out.data(),
                                        .cache = {.k = k.data(),
                                                  .v = v.data(),
                                                  .num_blocks = num_blocks,
                                                  .block_size = page,
                                                  .num_kv_heads = kv_heads,
                                                  .head_dim = d},
                                        .query_start_loc = d_qsl.as<std::int32_t>(),
                                        .seq_lens = d_lens.as<std::int32_t>(),
                                        .block_tables = d_table.as<std::int32_t>(),
                                        .num_seqs = batch,
                                        .max_blocks_per_seq = blocks_per_seq,
                                        .num_heads = heads,
                                        .softmax_scale = 1.0f / std::sqrt(128.0f),
                                        .dtype = ScalarType::kBF16};
  using kernels::DecodeKernel;
  auto time_plan = [&](const kernels::DecodeSplitPlan& pl, DecodeKernel kernel,
                       float softcap = 0.0f) {
    kernels::PagedAttentionParams pc = p;
    pc.logit_softcap = softcap;
    return median_ms(
        [&](int) {
          check(kernels::launch_paged_decode_attention(pc, pl,
                                                       {.partial_out = partial.as<float>(),
                                                        .partial_lse = lse.as<float>(),
                                                        .capacity_floats = ws},
                                                       kernel, nullptr),
                "decode attention");
        },
        20, 50);  // longer warm-up: the first row after the GEMM ceiling ran ~15% slow
  };
  // K and V of every sequence once (bf16), plus q in and out.
  const double bytes = 2.0 * cache_elems * 2 + 2.0 * batch * heads * d * 2;
  const double gbs = bytes / (time_plan(plan, DecodeKernel::kAuto) * 1e-3) / 1e9;
  char label[96];
  std::snprintf(label, sizeof(label), "%s (splits %d)", name, plan.num_splits);
  result(label, gbs, "GB/s", gbs / ceil.bandwidth_gbs, goal);
  // Each kernel on the same plan and sweep (kAuto runs the tensor-core one at bf16).
  const std::pair<DecodeKernel, const char*> others[] = {
      {DecodeKernel::kPipelined, " pipelined"},
      {DecodeKernel::kRegisters, " registers"},
      {DecodeKernel::kTensorCores, " tensor cores"}};
  for (const auto& [kernel, suffix] : others) {
    const double g = bytes / (time_plan(plan, kernel) * 1e-3) / 1e9;
    std::snprintf(label, sizeof(label), "%s%s (splits %d)", name, suffix, plan.num_splits);
    result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(info: another kernel)");
  }
  // The default kernel with Gemma 2's attention soft-cap (50): a tanh per score.
  {
    const double g = bytes / (time_plan(plan, DecodeKernel::kAuto, 50.0f) * 1e-3) / 1e9;
    std::snprintf(label, sizeof(label), "%s soft-cap (splits %d)", name, plan.num_splits);
    result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(info: ratio to B; compare the line above)");
  }
  // An FP8 cache of the same shape (--kv-cache-dtype fp8): half the K/V bytes, the codes of the
  // bf16 cache's values (through run 29 the bf16 buffers' raw bytes served as codes, NaN codes
  // among them: fp8_cache_codes.h). kAuto (the tensor-core kernel since run 29), the pipelined
  // one and the tensor-core kernel's direct variant (fragments built from the codes, session 23).
  {
    kernels::PagedAttentionParams p8 = p;
    const Fp8Cache codes(k, v, cache_elems);
    p8.cache.k = codes.k.data();
    p8.cache.v = codes.v.data();
    p8.cache.storage = kernels::KvCacheStorage::kFp8E4M3;
    const double fp8_bytes = 2.0 * cache_elems + 2.0 * batch * heads * d * 2;
    for (const auto& [kernel, suffix] :
         {std::pair{DecodeKernel::kAuto, ""}, std::pair{DecodeKernel::kPipelined, " pipelined"},
          std::pair{DecodeKernel::kTensorCoresDirect, " tensor cores direct"}}) {
      const double ms = median_ms(
          [&](int) {
            check(kernels::launch_paged_decode_attention(p8, plan,
                                                         {.partial_out = partial.as<float>(),
                                                          .partial_lse = lse.as<float>(),
                                                          .capacity_floats = ws},
                                                         kernel, nullptr),
                  "decode attention fp8");
          },
          20, 50);
      const double g = fp8_bytes / (ms * 1e-3) / 1e9;
      std::snprintf(label, sizeof(label), "%s fp8 cache%s (splits %d)", name, suffix,
                    plan.num_splits);
      result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(info: FP8 KV, bytes read)");
    }
  }
  for (int s : sweep) {
    const kernels::DecodeSplitPlan forced{
        .num_splits = s, .partition_size = static_cast<int>((context + s - 1) / s)};
    for (const auto& [kernel, suffix] : others) {
      const double g = bytes / (time_plan(forced, kernel) * 1e-3) / 1e9;
      std::snprintf(label, sizeof(label), "  sweep b%lld ctx%lld splits %d%s",
                    static_cast<long long>(batch), static_cast<long long>(context), s, suffix);
      result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(planner check)");
    }
  }
}

void bench_prefill_attention(const Ceilings& ceil) {
  const std::int64_t heads = 32, kv_heads = 8, d = 128, page = 16, len = 4096;
  const std::int64_t blocks = len / page;
  const std::int64_t cache_elems = blocks * kv_heads * page * d;
  DeviceBuffer k = random_buffer(cache_elems, ScalarType::kBF16, 20);
  DeviceBuffer v = random_buffer(cache_elems, ScalarType::kBF16, 21);
  DeviceBuffer q = random_buffer(len * heads * d, ScalarType::kBF16, 22);
  DeviceBuffer out = alloc(static_cast<std::size_t>(len * heads * d) * 2);
  std::vector<std::int32_t> table(blocks), qsl = {0, static_cast<std::int32_t>(len)},
                                           lens = {static_cast<std::int32_t>(len)};
  std::iota(table.begin(), table.end(), 0);
  DeviceBuffer d_table = alloc(table.size() * 4), d_qsl = alloc(8), d_lens = alloc(4);
  cudaMemcpy(d_table.data(), table.data(), table.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_qsl.data(), qsl.data(), 8, cudaMemcpyHostToDevice);
  cudaMemcpy(d_lens.data(), lens.data(), 4, cudaMemcpyHostToDevice);
  const kernels::PagedAttentionParams p{.q = q.data(),
                                        .q_row_stride = heads * d,
                                        .out = out.data(),
                                        .cache = {.k = k.data(),
                                                  .v = v.data(),
                                                  .num_blocks = blocks,
                                                  .block_size = page,
                                                  .num_kv_heads = kv_heads,
                                                  .head_dim = d},
                                        .query_start_loc = d_qsl.as<std::int32_t>(),
                                        .seq_lens = d_lens.as<std::int32_t>(),
                                        .block_tables = d_table.as<std::int32_t>(),
                                        .num_seqs = 1,
                                        .max_blocks_per_seq = blocks,
                                        .num_heads = heads,
                                        .softmax_scale = 1.0f / std::sqrt(128.0f),
                                        .dtype = ScalarType::kBF16};
  // Causal half of QK^T and PV: 4 * len^2 / 2 * d * heads.
  const double flops = 2.0 * len * len * d * heads;
  const double ms = median_ms(
      [&](int) { check(kernels::launch_paged_prefill_attention(p, len, nullptr), "prefill"); });
  const double tflops = flops / (ms * 1e-3) / 1e12;
  result("G10 prefill attention causal 4k d128 bf16", tflops, "TFLOP/s", tflops / ceil.tflops,
         ">= 0.40 F (FA2) / 0.70 F (FA3)");
  // Each prefill kernel on its own (kAuto above picks one of them), and over an FP8 cache (the
  // codes of the bf16 cache's values): the 128 x 64 tiles converting the codes in shared memory,
  // and the CUDA-core kernel.
  using kernels::PrefillKernel;
  kernels::PagedAttentionParams p8 = p;
  const Fp8Cache codes(k, v, cache_elems);
  p8.cache.k = codes.k.data();
  p8.cache.v = codes.v.data();
  p8.cache.storage = kernels::KvCacheStorage::kFp8E4M3;
  // Gemma 2's attention soft-cap (50): kAuto takes 32 rows/warp with 32-key tiles at d128 (the
  // 128 x 64 tile has no soft-cap).
  kernels::PagedAttentionParams capped = p;
  capped.logit_softcap = 50.0f;
  struct Variant {
    const kernels::PagedAttentionParams* params;
    PrefillKernel kernel;
    const char* name;
    const char* goal;
  };
  const Variant variants[] = {
      {&p, PrefillKernel::kReference, "G10 variant: CUDA-core reference", "(G10 variant)"},
      {&p, PrefillKernel::kMma16, "G10 variant: mma.sync 16 rows/warp", "(G10 variant)"},
      {&p, PrefillKernel::kMma32, "G10 variant: mma.sync 32 rows/warp", "(G10 variant)"},
      {&p, PrefillKernel::kMma32Keys64, "G10 variant: mma.sync 32 rows/warp, 64 keys",
       "(G10 variant)"},
      {&p8, PrefillKernel::kMma32Keys64, "G10 fp8 cache: mma.sync 32 rows/warp, 64 keys",
       "(info: FP8 KV)"},
      {&p8, PrefillKernel::kReference, "G10 fp8 cache: CUDA-core reference", "(info: FP8 KV)"},
      {&capped, PrefillKernel::kAuto, "G10 soft-cap 50: kAuto (32 rows/warp, 32 keys)",
       "(info: against the 32 rows/warp variant)"}};
  for (const Variant& v : variants) {
    const bool slow = v.kernel == PrefillKernel::kReference;
    const double variant_ms = median_ms(
        [&](int) {
          check(kernels::launch_paged_prefill_attention(*v.params, len, v.kernel, nullptr),
                "prefill");
        },
        slow ? 1 : 3, slow ? 3 : 20);
    const double variant_tflops = flops / (variant_ms * 1e-3) / 1e12;
    result(v.name, variant_tflops, "TFLOP/s", variant_tflops / ceil.tflops, v.goal);
  }
}

}  // namespace pagoda::bench
