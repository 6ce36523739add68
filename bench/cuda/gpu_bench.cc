// GPU benchmarks, every figure a ratio to ceilings measured in the same run (shared/GPU.md):
//   B = device-to-device copy bandwidth (bytes read + written), 1 GiB buffer;
//   F = cuBLASLt BF16 GEMM TFLOP/s at 8192^3 on random data.
// Kernel timings: CUDA events, warm-up, median of repeats; inputs larger than L2 or rotated.
//
//   gpu_bench kernels                     B, F and each kernel against its goal, the sampler of
//                                         execute() per batch x vocab ("sampler ..." lines)
//   gpu_bench kernels [GROUP...]          GROUP: decode, prefill, elementwise, sampler, skinny,
//                                         w4a16, gguf, fp8
//   gpu_bench model --config FILE.json    decode tokens/s with random weights (--load-format dummy)
//                   [--dtype bf16] [--batch 1,64,128] [--context 512] [--steps 32]
//                                         through forward() and through execute(), and the bytes
//                                         execute() copies to the host per decode step
//
// Output: one "RESULT name value unit ratio goal" line per figure (scripts/gpu_check.sh turns
// them into the table), plus notes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/random_fill.h"
#include "bench/cuda/bench_util.h"
#include "bench/cuda/model_bench.h"
#include "kernels/activation/silu_mul.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/fp8_linear.h"
#include "kernels/gemm/skinny_gemm.h"
#include "kernels/gemm/w4a16_gemm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_quantize.h"
#include "kernels/rope/rope_kv_cache.h"
#include "kernels/sampling/device_sampler.h"
#include "model/hf_config.h"
#include "models/cuda_model_executor.h"
#include "pagoda/step_sampling.h"
#include "quant/fp8_channel_layout.h"

namespace pagoda::bench {
namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

// y [m, n] = x [m, k] w [n, k]^T in BF16 through cuBLASLt: the baseline every GEMM figure is
// a ratio to.
void bf16_linear(cuda::BlasLt& blas, const void* x, const void* w, void* y, std::int64_t m,
                 std::int64_t n, std::int64_t k, const char* what) {
  check(blas.linear({.x = x,
                     .w = w,
                     .y = y,
                     .m = m,
                     .n = n,
                     .k = k,
                     .input_type = ScalarType::kBF16,
                     .output_type = ScalarType::kBF16},
                    nullptr),
        what);
}

struct Ceilings {
  double bandwidth_gbs = 0.0;  // B
  double tflops = 0.0;         // F
};

Ceilings measure_ceilings(cuda::BlasLt& blas) {
  Ceilings c;
  const std::size_t bytes = 1ull << 30;
  DeviceBuffer src = random_buffer(static_cast<std::int64_t>(bytes / 4), ScalarType::kF32, 1);
  DeviceBuffer dst = alloc(bytes);
  const double copy_ms = median_ms(
      [&](int) { cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice); });
  c.bandwidth_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  result("B: device copy (1 GiB, read+write)", c.bandwidth_gbs, "GB/s", 1.0, "ceiling");

  const std::int64_t n = 8192;
  DeviceBuffer a = random_buffer(n * n, ScalarType::kBF16, 2);
  DeviceBuffer w = random_buffer(n * n, ScalarType::kBF16, 3);
  DeviceBuffer y = alloc(static_cast<std::size_t>(n * n) * 2);
  const double gemm_ms =
      median_ms([&](int) { bf16_linear(blas, a.data(), w.data(), y.data(), n, n, n, "gemm"); });
  c.tflops = 2.0 * n * n * n / (gemm_ms * 1e-3) / 1e12;
  result("F: cuBLASLt BF16 GEMM 8192^3", c.tflops, "TFLOP/s", 1.0, "ceiling");
  return c;
}

// Llama-3-8B-shaped paged decode attention: 32 q / 8 kv heads, d 128, bf16, page 16.
// `sweep`: extra rows with these split counts forced, to check the planner's choice.
void bench_decode_attention(const Ceilings& ceil, int num_sms, std::int64_t batch,
                            std::int64_t context, const char* name, const char* goal,
                            std::vector<int> sweep = {}) {
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
  auto time_plan = [&](const kernels::DecodeSplitPlan& pl, DecodeKernel kernel) {
    return median_ms(
        [&](int) {
          check(kernels::launch_paged_decode_attention(p, pl,
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
  // The other kernels on the same plan and sweep (kAuto runs the pipelined one).
  const std::pair<DecodeKernel, const char*> others[] = {
      {DecodeKernel::kRegisters, " registers"}, {DecodeKernel::kTensorCores, " tensor cores"}};
  for (const auto& [kernel, suffix] : others) {
    const double g = bytes / (time_plan(plan, kernel) * 1e-3) / 1e9;
    std::snprintf(label, sizeof(label), "%s%s (splits %d)", name, suffix, plan.num_splits);
    result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(info: another kernel)");
  }
  // An FP8 cache of the same shape (--kv-cache-dtype fp8): half the K/V bytes. The bf16 buffers'
  // first halves serve as codes (some are NaN codes; nothing in the loop branches on values).
  {
    kernels::PagedAttentionParams p8 = p;
    p8.cache.storage = kernels::KvCacheStorage::kFp8E4M3;
    const double fp8_bytes = 2.0 * cache_elems + 2.0 * batch * heads * d * 2;
    const double ms = median_ms(
        [&](int) {
          check(kernels::launch_paged_decode_attention(p8, plan,
                                                       {.partial_out = partial.as<float>(),
                                                        .partial_lse = lse.as<float>(),
                                                        .capacity_floats = ws},
                                                       nullptr),
                "decode attention fp8");
        },
        20, 50);
    const double g = fp8_bytes / (ms * 1e-3) / 1e9;
    std::snprintf(label, sizeof(label), "%s fp8 cache (splits %d)", name, plan.num_splits);
    result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(info: FP8 KV, bytes read)");
  }
  for (int s : sweep) {
    const kernels::DecodeSplitPlan forced{
        .num_splits = s, .partition_size = static_cast<int>((context + s - 1) / s)};
    for (const auto& [kernel, suffix] :
         {std::pair{DecodeKernel::kPipelined, ""}, others[0], others[1]}) {
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
  // bf16 buffers' first halves as codes): the 128 x 64 tiles converting the codes in shared
  // memory, and the CUDA-core kernel.
  using kernels::PrefillKernel;
  kernels::PagedAttentionParams p8 = p;
  p8.cache.storage = kernels::KvCacheStorage::kFp8E4M3;
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
      {&p8, PrefillKernel::kReference, "G10 fp8 cache: CUDA-core reference", "(info: FP8 KV)"}};
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

void bench_elementwise(const Ceilings& ceil) {
  // G11: residual add + RMSNorm, hidden 4096, 16384 tokens (4 x 134 MB streams).
  {
    const std::int64_t tokens = 16384, hidden = 4096, n = tokens * hidden;
    DeviceBuffer x = random_buffer(n, ScalarType::kBF16, 30);
    DeviceBuffer res = random_buffer(n, ScalarType::kBF16, 31);
    DeviceBuffer w = random_buffer(hidden, ScalarType::kBF16, 32, 0.9f, 1.1f);
    DeviceBuffer out = alloc(static_cast<std::size_t>(n) * 2);
    const double ms = median_ms([&](int) {
      check(kernels::launch_rms_norm({.x = x.data(),
                                      .residual = res.data(),
                                      .weight = w.data(),
                                      .out = out.data(),
                                      .num_tokens = tokens,
                                      .hidden = hidden,
                                      .eps = 1e-5f,
                                      .dtype = ScalarType::kBF16},
                                     nullptr),
            "rms_norm");
    });
    const double gbs = 4.0 * n * 2 / (ms * 1e-3) / 1e9;
    result("G11 residual add + RMSNorm bf16 4096 x 16k", gbs, "GB/s", gbs / ceil.bandwidth_gbs,
           ">= 0.75 B");
  }
  // G12: SiLU * up, 14336 wide, 8192 tokens.
  {
    const std::int64_t tokens = 8192, width = 14336;
    DeviceBuffer gu = random_buffer(tokens * 2 * width, ScalarType::kBF16, 33, -4.0f, 4.0f);
    DeviceBuffer out = alloc(static_cast<std::size_t>(tokens * width) * 2);
    const double ms = median_ms([&](int) {
      check(kernels::launch_silu_mul({.gate_up = gu.data(),
                                      .gate_up_row_stride = 2 * width,
                                      .out = out.data(),
                                      .num_tokens = tokens,
                                      .width = width,
                                      .dtype = ScalarType::kBF16},
                                     nullptr),
            "silu_mul");
    });
    const double gbs = 3.0 * tokens * width * 2 / (ms * 1e-3) / 1e9;
    result("G12 SiLU*up bf16 14336 x 8k", gbs, "GB/s", gbs / ceil.bandwidth_gbs, ">= 0.75 B");
  }
  // G12: RoPE + KV append, Llama-3-8B qkv rows, 16384 tokens.
  {
    const std::int64_t tokens = 16384, heads = 32, kv_heads = 8, d = 128, page = 16;
    const std::int64_t stride = (heads + 2 * kv_heads) * d;
    DeviceBuffer qkv = random_buffer(tokens * stride, ScalarType::kBF16, 34);
    const std::int64_t cache = tokens * kv_heads * d;
    DeviceBuffer k = alloc(static_cast<std::size_t>(cache) * 2),
                 v = alloc(static_cast<std::size_t>(cache) * 2);
    std::vector<std::int32_t> pos(tokens);
    std::vector<std::int64_t> slots(tokens);
    std::iota(pos.begin(), pos.end(), 0);
    std::iota(slots.begin(), slots.end(), 0);
    std::vector<float> inv_freq(d / 2);
    for (std::int64_t i = 0; i < d / 2; ++i) inv_freq[i] = std::pow(500000.0f, -2.0f * i / d);
    DeviceBuffer d_pos = alloc(tokens * 4), d_slots = alloc(tokens * 8), d_freq = alloc(d / 2 * 4);
    cudaMemcpy(d_pos.data(), pos.data(), tokens * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(d_slots.data(), slots.data(), tokens * 8, cudaMemcpyHostToDevice);
    cudaMemcpy(d_freq.data(), inv_freq.data(), d / 2 * 4, cudaMemcpyHostToDevice);
    auto time_rope = [&](kernels::RopeStyle style) {
      return median_ms([&](int) {
        check(kernels::launch_rope_kv_cache({.qkv = qkv.data(),
                                             .qkv_row_stride = stride,
                                             .positions = d_pos.as<std::int32_t>(),
                                             .slot_mapping = d_slots.as<std::int64_t>(),
                                             .inv_freq = d_freq.as<float>(),
                                             .cache = {.k = k.data(),
                                                       .v = v.data(),
                                                       .num_blocks = tokens / page,
                                                       .block_size = page,
                                                       .num_kv_heads = kv_heads,
                                                       .head_dim = d},
                                             .num_tokens = tokens,
                                             .num_heads = heads,
                                             .style = style,
                                             .dtype = ScalarType::kBF16},
                                            nullptr),
              "rope");
      });
    };
    // Read q, k, v; write q back and k, v into the cache.
    const double bytes = (stride + (heads + 2 * kv_heads) * d) * 2.0 * tokens;
    const double gbs = bytes / (time_rope(kernels::RopeStyle::kRotateHalf) * 1e-3) / 1e9;
    result("G12 RoPE + KV append bf16 Llama-3-8B x 16k", gbs, "GB/s", gbs / ceil.bandwidth_gbs,
           ">= 0.75 B");
    // The GGUF-converted pair order, and the same launches without PDL (back-to-back launches of
    // one kernel overlap one's prologue with the other's tail only with it).
    const double adjacent = bytes / (time_rope(kernels::RopeStyle::kAdjacentPairs) * 1e-3) / 1e9;
    result("G12 variant: RoPE adjacent pairs", adjacent, "GB/s", adjacent / ceil.bandwidth_gbs,
           "(G12 variant)");
    const bool pdl = kernels::pdl_enabled();
    kernels::set_pdl_enabled(false);
    const double no_pdl = bytes / (time_rope(kernels::RopeStyle::kRotateHalf) * 1e-3) / 1e9;
    kernels::set_pdl_enabled(pdl);
    result("G12 variant: RoPE rotate-half, PDL off", no_pdl, "GB/s", no_pdl / ceil.bandwidth_gbs,
           "(G12 variant)");
  }
}

// The sampler of execute() (kernels/sampling/device_sampler.h): process + sample + logprobs of
// one step's logits already on the device, per batch and vocabulary, in two settings:
//   plain  temperature 1, top-p 0.9; no processors, no logprobs
//   full   temperature 0.8, top-k 50, top-p 0.95; presence/frequency/repetition penalties over a
//          64-token prompt and 32 counted outputs, 16 biased tokens; 5 logprobs
// The ratio is the time over one read of the logits at B. G13 (top-k 50 + top-p 0.9, 256 rows of
// 128256, nothing else) keeps its goal.
void bench_sampler(const Ceilings& ceil) {
  struct Setting {
    const char* name;
    bool full;
  };
  for (const std::int64_t vocab : {49152, 128256}) {
    for (const std::int64_t batch : {1, 64, 256}) {
      auto made = kernels::DeviceSampler::create(
          {.vocab_size = vocab, .max_rows = batch, .max_chunk_rows = batch});
      if (!made.ok()) die(made.status(), "sampler");
      kernels::DeviceSampler& sampler = *made;
      DeviceBuffer logits = random_buffer(batch * vocab, ScalarType::kF32, 40, -10.0f, 10.0f);
      std::mt19937 rng(41);
      SlotSamplingConfig full;
      full.presence_penalty = 0.3f;
      full.frequency_penalty = 0.2f;
      full.repetition_penalty = 1.1f;
      for (int i = 0; i < 64; ++i)
        full.prompt_token_ids.push_back(static_cast<std::int32_t>(rng() % vocab));
      for (std::int32_t id = 0; id < 16; ++id) full.logit_bias.emplace_back(id * 997 % vocab, 1.0f);
      std::sort(full.logit_bias.begin(), full.logit_bias.end());
      std::vector<std::int32_t> outputs(32);
      for (auto& t : outputs) t = static_cast<std::int32_t>(rng() % vocab);
      for (std::int32_t slot = 0; slot < batch; ++slot) {
        check(sampler.open_slot(slot, {}, nullptr), "open plain slot");
        check(sampler.open_slot(static_cast<std::int32_t>(batch) + slot, full, nullptr),
              "open full slot");
        check(sampler.accept_tokens(static_cast<std::int32_t>(batch) + slot, outputs, nullptr),
              "accept");
      }
      for (const Setting& setting : {Setting{"plain", false}, Setting{"full", true}}) {
        SamplingBatch rows;
        for (std::int32_t r = 0; r < batch; ++r) {
          SamplingRow row{.slot = setting.full ? static_cast<std::int32_t>(batch) + r : r,
                          .temperature = setting.full ? 0.8f : 1.0f,
                          .top_k = setting.full ? 50 : 0,
                          .top_p = setting.full ? 0.95f : 0.9f,
                          .seed = 7,
                          .position = r,
                          .num_logprobs = setting.full ? 5 : -1};
          rows.rows.push_back(row);
        }
        check(sampler.begin_step(rows, nullptr), "begin_step");
        const double ms = median_ms([&](int) {
          check(sampler.sample_chunk(logits.as<float>(), 0, batch, nullptr), "sample_chunk");
        });
        StepOutput out;
        check(sampler.finish_step(nullptr, out), "finish_step");
        const double one_read_ms = batch * vocab * 4.0 / (ceil.bandwidth_gbs * 1e9) * 1e3;
        char label[96];
        std::snprintf(label, sizeof(label), "sampler %s b%lld x %lld (process+sample+logprobs)",
                      setting.name, static_cast<long long>(batch), static_cast<long long>(vocab));
        result(label, ms * 1e3, "us", ms / one_read_ms, "(info) time / one read of the logits");
      }
      if (vocab == 128256 && batch == 256) {
        SamplingBatch rows;
        check(sampler.open_slot(static_cast<std::int32_t>(2 * batch), {}, nullptr), "open");
        for (std::int32_t r = 0; r < batch; ++r) {
          rows.rows.push_back({.slot = static_cast<std::int32_t>(2 * batch),
                               .temperature = 1.0f,
                               .top_k = 50,
                               .top_p = 0.9f,
                               .seed = 7,
                               .position = r});
        }
        check(sampler.begin_step(rows, nullptr), "begin_step");
        const double ms = median_ms([&](int) {
          check(sampler.sample_chunk(logits.as<float>(), 0, batch, nullptr), "sample_chunk");
        });
        StepOutput out;
        check(sampler.finish_step(nullptr, out), "finish_step");
        const double one_read_ms = batch * vocab * 4.0 / (ceil.bandwidth_gbs * 1e9) * 1e3;
        result("G13 top-k 50 + top-p 0.9, 256 x 128256 fp32", ms * 1e3, "us", ms / one_read_ms,
               "<= 3x one read of the logits at B");
      }
    }
  }
}

// G5: the decode products at m = 1..16 rows, weight bytes over time, cuBLASLt and (m <= 4) the
// skinny kernel the executor dispatches to, on the same buffers.
void bench_skinny_gemm(const Ceilings& ceil, cuda::BlasLt& blas) {
  const std::int64_t shapes[][2] = {
      {6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}, {128256, 4096}};
  for (std::int64_t m : {1, 2, 4, 8, 16}) {
    for (const auto& s : shapes) {
      const std::int64_t n = s[0], k = s[1];
      // Four weight copies rotated so each call streams from HBM, not L2.
      std::vector<DeviceBuffer> w;
      for (int i = 0; i < 4; ++i) w.push_back(random_buffer(n * k, ScalarType::kBF16, 50 + i));
      DeviceBuffer x = random_buffer(m * k, ScalarType::kBF16, 60);
      DeviceBuffer y = alloc(static_cast<std::size_t>(m * n) * 2);
      const double cublas_ms = median_ms([&](int i) {
        bf16_linear(blas, x.data(), w[i % 4].data(), y.data(), m, n, k, "skinny gemm");
      });
      const double weight_bytes = n * k * 2.0;
      const double cublas_gbs = weight_bytes / (cublas_ms * 1e-3) / 1e9;
      char label[96];
      std::snprintf(label, sizeof(label), "G5 cuBLASLt bf16 M=%lld %lldx%lld",
                    static_cast<long long>(m), static_cast<long long>(n),
                    static_cast<long long>(k));
      result(label, cublas_gbs, "GB/s", cublas_gbs / ceil.bandwidth_gbs,
             ">= 0.80 B (weight bytes)");
      kernels::SkinnyGemmParams p{
          .x = x.data(), .y = y.data(), .m = m, .n = n, .k = k, .dtype = ScalarType::kBF16};
      p.w = w[0].data();
      if (!kernels::skinny_gemm_applies(p)) continue;
      const double ours_ms = median_ms([&](int i) {
        p.w = w[i % 4].data();
        check(kernels::launch_skinny_gemm(p, nullptr), "skinny kernel");
      });
      const double ours_gbs = weight_bytes / (ours_ms * 1e-3) / 1e9;
      std::snprintf(label, sizeof(label), "G5 skinny bf16 M=%lld %lldx%lld (cuBLAS/ours %.2fx)",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                    cublas_ms / ours_ms);
      result(label, ours_gbs, "GB/s", ours_gbs / ceil.bandwidth_gbs,
             ">= 0.80 B and >= 1.0x cuBLAS");
    }
  }
}

// G6 / G7: W4A16 (group 128) against cuBLASLt BF16 on the same shapes, as time ratios
// (cuBLAS / ours, above 1 is faster), weights rotated past L2; at m >= 64 also the large-m
// path (dequantize to bf16, then cuBLASLt), which the executor's dispatch picks when faster.
void bench_w4a16(const Ceilings& ceil, cuda::BlasLt& blas) {
  const std::int64_t shapes[][2] = {{4096, 14336}, {28672, 4096}, {6144, 4096}, {4096, 4096}};
  constexpr std::int64_t kGroup = 128;
  constexpr int kCopies = 8;
  for (const auto& s : shapes) {
    const std::int64_t n = s[0], k = s[1];
    const std::int64_t padded_n = (n + 15) / 16 * 16, k_tiles = (k + 63) / 64;
    const std::int64_t groups = (k + kGroup - 1) / kGroup;
    const auto packed_bytes = static_cast<std::size_t>(padded_n / 16 * k_tiles * 512);
    const auto scale_bytes = static_cast<std::size_t>(groups * padded_n * 2);
    std::vector<DeviceBuffer> bf16_w, packed, scales, zeros;
    for (int i = 0; i < kCopies; ++i) {
      bf16_w.push_back(random_buffer(n * k, ScalarType::kBF16, 70 + i));
      // Random codes (any bits are valid codes), scales 0x2020 (~0.0084), zeros 8.
      packed.push_back(
          random_buffer(static_cast<std::int64_t>(packed_bytes / 4), ScalarType::kF32, 80 + i));
      scales.push_back(alloc(scale_bytes));
      zeros.push_back(alloc(scale_bytes / 2));
      check(cuda::cuda_status(cudaMemset(scales.back().data(), 0x20, scale_bytes), "memset"),
            "scales");
      check(cuda::cuda_status(cudaMemset(zeros.back().data(), 8, scale_bytes / 2), "memset"),
            "zeros");
    }
    const auto weights = [&](int i) {
      return kernels::W4A16Weights{.packed = packed[i % kCopies].as<std::uint32_t>(),
                                   .scales = scales[i % kCopies].as<std::uint16_t>(),
                                   .zeros = zeros[i % kCopies].as<std::uint8_t>(),
                                   .rows = n,
                                   .cols = k,
                                   .group_size = kGroup};
    };
    DeviceBuffer dequantized = alloc(static_cast<std::size_t>(n * k) * 2);
    const double int4_bytes = static_cast<double>(packed_bytes + scale_bytes + scale_bytes / 2);
    for (std::int64_t m : {1, 16, 64, 128, 256}) {
      DeviceBuffer x = random_buffer(m * k, ScalarType::kBF16, 90);
      DeviceBuffer y = alloc(static_cast<std::size_t>(m * n) * 2);
      const std::size_t ws_bytes = kernels::w4a16_gemm_workspace_bytes(m, n, k);
      DeviceBuffer ws = alloc(std::max<std::size_t>(ws_bytes, 4));
      const std::int64_t counter_count = kernels::w4a16_gemm_counter_count(m, n);
      DeviceBuffer counters = alloc(static_cast<std::size_t>(counter_count) * sizeof(int));
      check(cuda::cuda_status(cudaMemset(counters.data(), 0, counters.bytes()), "memset"),
            "counters");
      const auto cublas = [&](const void* w) {
        bf16_linear(blas, x.data(), w, y.data(), m, n, k, "cublas bf16");
      };
      const double cublas_ms = median_ms([&](int i) { cublas(bf16_w[i % kCopies].data()); });
      // As W4A16Linear runs it (K splits added by the reduction kernel), and with the
      // in-kernel reduction (counters) for comparison.
      const auto ours = [&](int i, bool in_kernel_reduce) {
        check(
            kernels::launch_w4a16_gemm({.x = x.data(),
                                        .w = weights(i),
                                        .y = y.data(),
                                        .m = m,
                                        .dtype = ScalarType::kBF16,
                                        .workspace = ws.as<float>(),
                                        .workspace_bytes = ws_bytes,
                                        .counters = in_kernel_reduce ? counters.as<int>() : nullptr,
                                        .counters_count = in_kernel_reduce ? counter_count : 0},
                                       nullptr),
            "w4a16");
      };
      const double ours_ms = median_ms([&](int i) { ours(i, false); });
      const double in_kernel_ms = median_ms([&](int i) { ours(i, true); });
      const char* goal = m == 1    ? ">= 2.0x cuBLAS bf16 (stretch 2.8x)"
                         : m == 16 ? ">= 1.9x cuBLAS bf16"
                         : m == 64 ? ">= 1.2x cuBLAS bf16"
                                   : "(info; dispatch takes the faster path)";
      char label[112];
      std::snprintf(label, sizeof(label), "%s W4A16 g128 M=%lld %lldx%lld (%.0f GB/s)",
                    m == 1 ? "G6" : "G7", static_cast<long long>(m), static_cast<long long>(n),
                    static_cast<long long>(k), int4_bytes / (ours_ms * 1e-3) / 1e9);
      result(label, ours_ms * 1e3, "us", cublas_ms / ours_ms, goal);
      std::snprintf(label, sizeof(label), "%s W4A16 g128 M=%lld %lldx%lld in-kernel split sum",
                    m == 1 ? "G6" : "G7", static_cast<long long>(m), static_cast<long long>(n),
                    static_cast<long long>(k));
      result(label, in_kernel_ms * 1e3, "us", cublas_ms / in_kernel_ms, "(info: counters)");
      if (m < 64) continue;
      const double dequant_ms = median_ms([&](int i) {
        check(kernels::launch_w4a16_dequantize(weights(i), dequantized.data(), ScalarType::kBF16,
                                               nullptr),
              "dequantize");
        cublas(dequantized.data());
      });
      std::snprintf(label, sizeof(label), "G7 dequant+cuBLAS g128 M=%lld %lldx%lld",
                    static_cast<long long>(m), static_cast<long long>(n),
                    static_cast<long long>(k));
      result(label, dequant_ms * 1e3, "us", cublas_ms / dequant_ms, "(info: the large-m path)");
    }
  }
  (void)ceil;
}

// GGUF weights kept quantized (issue 28 point 4): the W4A16 kernel's GGUF form for Q4_K (4-bit
// codes, a min term per 32: one more mma per step), Q5_K (5-bit: a high-bit word per lane per
// tile, a min term), Q6_K (6-bit: two high-bit words, scales per 16) and Q8_0 (8-bit: a second
// nibble tile, an FMA per pair), against cuBLASLt BF16 on Llama-3-8B's shapes
// as time ratios (above 1 is faster), with the bytes each form streams per second; weights
// rotated past L2. No goal is set yet: the first run measures where the forms stand against G6/G7.
void bench_gguf(cuda::BlasLt& blas) {
  const std::int64_t shapes[][2] = {{4096, 14336}, {28672, 4096}, {6144, 4096}};
  constexpr int kCopies = 8;
  struct Type {
    const char* name;
    std::int64_t group_size;
    int super_shift, code_zero;
    int hi_bits;
    bool has_min;
  };
  for (const Type& t : {Type{"Q4_K", 32, 3, 0, 0, true}, Type{"Q5_K", 32, 3, 0, 1, true},
                        Type{"Q6_K", 16, 4, 32, 2, false}, Type{"Q8_0", 32, 0, 128, 4, false}}) {
    for (const auto& s : shapes) {
      const std::int64_t n = s[0], k = s[1];
      const std::int64_t padded_n = (n + 15) / 16 * 16, k_tiles = (k + 63) / 64;
      const std::int64_t groups = k / t.group_size;
      const std::int64_t super_groups = ((groups - 1) >> t.super_shift) + 1;
      const auto packed_bytes = static_cast<std::size_t>(padded_n / 16 * k_tiles * 512);
      const auto code_bytes = static_cast<std::size_t>(groups * padded_n);
      const auto scale_bytes = static_cast<std::size_t>(super_groups * padded_n * 2);
      std::vector<DeviceBuffer> bf16_w, packed, packed_hi, scales, codes, mins;
      for (int i = 0; i < kCopies; ++i) {
        bf16_w.push_back(random_buffer(n * k, ScalarType::kBF16, 170 + i));
        // Random codes; scales and mins 0x2020 (~0.0084), sub-block codes 1.
        packed.push_back(
            random_buffer(static_cast<std::int64_t>(packed_bytes / 4), ScalarType::kF32, 180 + i));
        if (t.hi_bits > 0) {
          packed_hi.push_back(random_buffer(
              static_cast<std::int64_t>(packed_bytes / 16 * t.hi_bits), ScalarType::kF32, 190 + i));
        }
        scales.push_back(alloc(scale_bytes));
        codes.push_back(alloc(code_bytes));
        check(cuda::cuda_status(cudaMemset(scales.back().data(), 0x20, scale_bytes), "memset"),
              "scales");
        check(cuda::cuda_status(cudaMemset(codes.back().data(), 1, code_bytes), "memset"), "codes");
        if (t.has_min) {
          mins.push_back(alloc(scale_bytes));
          check(cuda::cuda_status(cudaMemset(mins.back().data(), 0x20, scale_bytes), "memset"),
                "mins");
        }
      }
      const auto weights = [&](int i) {
        const int c = i % kCopies;
        return kernels::W4A16Weights{
            .packed = packed[c].as<std::uint32_t>(),
            .scales = scales[c].as<std::uint16_t>(),
            .rows = n,
            .cols = k,
            .group_size = t.group_size,
            .packed_hi = t.hi_bits > 0 ? packed_hi[c].as<std::uint32_t>() : nullptr,
            .scale_codes = codes[c].as<std::int8_t>(),
            .mins = t.has_min ? mins[c].as<std::uint16_t>() : nullptr,
            .min_codes = t.has_min ? codes[c].as<std::int8_t>() : nullptr,
            .super_shift = t.super_shift,
            .code_zero = t.code_zero,
            .hi_bits = t.hi_bits};
      };
      const double device_bytes = static_cast<double>(
          packed_bytes * (4 + t.hi_bits) / 4 + (scale_bytes + code_bytes) * (t.has_min ? 2 : 1));
      for (std::int64_t m : {1, 16, 64, 256}) {
        DeviceBuffer x = random_buffer(m * k, ScalarType::kBF16, 91);
        DeviceBuffer y = alloc(static_cast<std::size_t>(m * n) * 2);
        const std::size_t ws_bytes = kernels::w4a16_gemm_workspace_bytes(m, n, k);
        DeviceBuffer ws = alloc(std::max<std::size_t>(ws_bytes, 4));
        const double cublas_ms = median_ms([&](int i) {
          bf16_linear(blas, x.data(), bf16_w[i % kCopies].data(), y.data(), m, n, k, "cublas bf16");
        });
        const double ours_ms = median_ms([&](int i) {
          check(kernels::launch_w4a16_gemm({.x = x.data(),
                                            .w = weights(i),
                                            .y = y.data(),
                                            .m = m,
                                            .dtype = ScalarType::kBF16,
                                            .workspace = ws.as<float>(),
                                            .workspace_bytes = ws_bytes},
                                           nullptr),
                "gguf");
        });
        char label[112];
        std::snprintf(label, sizeof(label), "GGUF %s M=%lld %lldx%lld (%.0f GB/s)", t.name,
                      static_cast<long long>(m), static_cast<long long>(n),
                      static_cast<long long>(k), device_bytes / (ours_ms * 1e-3) / 1e9);
        result(label, ours_ms * 1e3, "us", cublas_ms / ours_ms, "(info: x cuBLAS bf16)");
      }
    }
  }
}

// G8: FP8 W8A8 (E4M3 codes, per-token x per-channel scales) at prefill shapes, TFLOP/s against F:
// the unscaled cuBLASLt FP8 product (the ceiling of this path), the layer from quantized
// activations as the executor runs it after a fused producer (Fp8Linear::forward_quantized:
// cuBLASLt's own scaling where it has it, else fp32 sums + the scale epilogue), and the layer
// with the activations' quantization in front (Fp8Linear::forward).
void bench_fp8(const Ceilings& ceil, cuda::BlasLt& blas) {
  std::printf("note: FP8 scaling by %s\n", blas.fp8_linear_supported()
                                               ? "cuBLASLt (OUTER_VEC scale vectors)"
                                               : "fp32 sums + fp8_scale_epilogue");
  const std::int64_t shapes[][2] = {{6144, 4096}, {28672, 4096}, {4096, 14336}, {8192, 8192}};
  std::mt19937 rng(100);
  for (const auto& s : shapes) {
    const std::int64_t n = s[0], k = s[1];
    quant::Fp8ChannelMatrix host{.rows = n, .cols = k};
    host.codes.resize(static_cast<std::size_t>(n * k));
    for (std::uint8_t& c : host.codes) c = static_cast<std::uint8_t>(rng() & 0x77);  // finite
    host.scales.assign(static_cast<std::size_t>(n), 1.0f / 256);
    StatusOr<kernels::Fp8Linear> layer = kernels::Fp8Linear::upload(host);
    check(layer.status(), "fp8 upload");
    DeviceBuffer w = random_buffer(n * k / 4, ScalarType::kF32, 100);  // raw codes: any byte
    for (std::int64_t m : {2048, 4096, 8192}) {
      DeviceBuffer x = random_buffer(m * k / 4, ScalarType::kF32, 101);
      DeviceBuffer x16 = random_buffer(m * k, ScalarType::kBF16, 102);
      DeviceBuffer xs = random_buffer(m, ScalarType::kF32, 104, 1.0f / 512, 1.0f / 128);
      DeviceBuffer y = alloc(static_cast<std::size_t>(m * n) * 2);
      DeviceBuffer sums = alloc(static_cast<std::size_t>(m * n) * sizeof(float));
      DeviceBuffer scratch = alloc(layer->scratch_bytes(m));
      const double raw_ms = median_ms([&](int) {
        check(blas.linear_fp8_sums(
                  {.x = x.data(), .w = w.data(), .sums = sums.as<float>(), .m = m, .n = n, .k = k},
                  nullptr),
              "fp8 sums");
      });
      const double layer_ms = median_ms([&](int) {
        check(layer->forward_quantized(x.as<std::uint8_t>(), xs.as<float>(), m, nullptr, y.data(),
                                       ScalarType::kBF16, blas, sums.data(), sums.bytes(), nullptr),
              "fp8 layer");
      });
      const double with_quant_ms = median_ms([&](int) {
        check(layer->forward(x16.data(), m, nullptr, y.data(), ScalarType::kBF16, blas,
                             scratch.data(), scratch.bytes(), nullptr),
              "fp8 quant+layer");
      });
      const double flops = 2.0 * m * n * k;
      const auto report = [&](const char* what, double ms, const char* goal) {
        char label[112];
        std::snprintf(label, sizeof(label), "G8 fp8 %s M=%lld %lldx%lld", what,
                      static_cast<long long>(m), static_cast<long long>(n),
                      static_cast<long long>(k));
        const double tflops = flops / (ms * 1e-3) / 1e12;
        result(label, tflops, "TFLOP/s", tflops / ceil.tflops, goal);
      };
      report("sums (unscaled cuBLASLt)", raw_ms, "(info: this path's ceiling)");
      report("layer", layer_ms, ">= 1.6x F (stretch 1.85x)");
      report("quant+layer", with_quant_ms, ">= 1.6x F (stretch 1.85x)");
    }
  }
}

// `groups` empty: all; else any of decode, prefill, elementwise, sampler, skinny, w4a16, gguf,
// fp8.
int run_kernels(const std::vector<std::string>& groups) {
  const auto wanted = [&](const char* group) {
    return groups.empty() || std::find(groups.begin(), groups.end(), group) != groups.end();
  };
  auto props = cuda::current_device_properties();
  if (!props.ok()) die(props.status(), "device");
  std::printf("device: %s, %d SMs, L2 %lld MB, %.1f GiB\n", props->name.c_str(), props->num_sms,
              static_cast<long long>(props->l2_bytes >> 20),
              props->total_memory_bytes / 1073741824.0);
  auto blas = cuda::BlasLt::create(32u << 20);
  if (!blas.ok()) die(blas.status(), "cublasLt");
  const Ceilings ceil = measure_ceilings(**blas);
  if (wanted("decode")) {
    bench_decode_attention(ceil, props->num_sms, 64, 2048, "G1 decode attn b64 ctx2048",
                           ">= 0.75 B", {1, 2, 4});
    bench_decode_attention(ceil, props->num_sms, 64, 512, "G2 decode attn b64 ctx512", ">= 0.60 B",
                           {1, 2});
    bench_decode_attention(ceil, props->num_sms, 1, 16384, "G3 decode attn b1 ctx16k", ">= 0.70 B",
                           {32, 64, 128});
    bench_decode_attention(ceil, props->num_sms, 16, 4096, "decode attn b16 ctx4096", "(info)");
    // The 8B serving benchmark's decode steps: 256 sequences at its mean context.
    bench_decode_attention(ceil, props->num_sms, 256, 1536, "decode attn b256 ctx1536",
                           "(info: serving shape)");
  }
  if (wanted("prefill")) bench_prefill_attention(ceil);
  if (wanted("elementwise")) bench_elementwise(ceil);
  if (wanted("sampler")) bench_sampler(ceil);
  if (wanted("skinny")) bench_skinny_gemm(ceil, **blas);
  if (wanted("w4a16")) bench_w4a16(ceil, **blas);
  if (wanted("gguf")) bench_gguf(**blas);
  if (wanted("fp8")) bench_fp8(ceil, **blas);
  return 0;
}

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace
}  // namespace pagoda::bench

int main(int argc, char** argv) {
  using namespace pagoda;
  if (cuda::cuda_device_count() == 0) {
    std::fprintf(stderr, "gpu_bench: no CUDA device\n");
    return 2;
  }
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "kernels") return bench::run_kernels(std::vector<std::string>(argv + 2, argv + argc));
  if (mode == "model") {
    std::string config;
    std::string dtype_name = "bf16";
    std::string batches = "1,64,128";
    int context = 512;
    int steps = 32;
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      const std::string value = argv[i + 1];
      if (flag == "--config")
        config = value;
      else if (flag == "--dtype")
        dtype_name = value;
      else if (flag == "--batch")
        batches = value;
      else if (flag == "--context")
        context = std::stoi(value);
      else if (flag == "--steps")
        steps = std::stoi(value);
    }
    cuda::ScalarType dtype;
    if (config.empty() || !cuda::parse_scalar_type(dtype_name, &dtype) || context < 1 ||
        steps < 2) {
      std::fprintf(stderr,
                   "usage: gpu_bench model --config FILE.json [--dtype bf16] "
                   "[--batch 1,64,128] [--context 512] [--steps 32]\n");
      return 2;
    }
    return bench::run_model(config, dtype, bench::parse_list(batches), context, steps);
  }
  std::fprintf(stderr, "usage: gpu_bench kernels | gpu_bench model --config FILE.json ...\n");
  return 2;
}
