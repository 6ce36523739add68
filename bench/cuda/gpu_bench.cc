// GPU benchmarks, every figure a ratio to ceilings measured in the same run (shared/GPU.md):
//   B = device-to-device copy bandwidth (bytes read + written), 1 GiB buffer;
//   F = cuBLASLt BF16 GEMM TFLOP/s at 8192^3 on random data.
// Kernel timings: CUDA events, warm-up, median of repeats; inputs larger than L2 or rotated.
//
//   gpu_bench kernels                     B, F and each kernel against its goal, the sampler of
//                                         execute() per batch x vocab ("sampler ..." lines)
//   gpu_bench kernels [GROUP...]          GROUP: decode, prefill, elementwise, sampler, skinny
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
#include "kernels/activation/silu_mul.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/pdl.cuh"
#include "kernels/gemm/skinny_gemm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/rope/rope_kv_cache.h"
#include "kernels/sampling/device_sampler.h"
#include "model/hf_config.h"
#include "models/cuda_model_executor.h"
#include "pagoda/step_sampling.h"

namespace pagoda::bench {
namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

[[noreturn]] void die(const Status& s, const char* where) {
  std::fprintf(stderr, "gpu_bench: %s: %s\n", where, s.to_string().c_str());
  std::exit(1);
}

void check(const Status& s, const char* where) {
  if (!s.ok()) die(s, where);
}

DeviceBuffer alloc(std::size_t bytes) {
  auto b = DeviceBuffer::allocate(bytes);
  if (!b.ok()) die(b.status(), "allocate");
  return std::move(*b);
}

DeviceBuffer random_buffer(std::int64_t n, ScalarType type, std::uint64_t seed, float low = -1.0f,
                           float high = 1.0f) {
  DeviceBuffer b = alloc(static_cast<std::size_t>(n) * cuda::scalar_type_size(type));
  check(cuda::fill_uniform(b.data(), n, type, low, high, seed, nullptr), "fill");
  return b;
}

// Median milliseconds of `repeats` runs of `fn` after `warmup` runs, each timed with events.
double median_ms(const std::function<void(int)>& fn, int warmup = 3, int repeats = 20) {
  for (int i = 0; i < warmup; ++i) fn(i);
  check(cuda::cuda_status(cudaDeviceSynchronize(), "sync"), "warm-up");
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    cudaEventRecord(start);
    fn(warmup + i);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  check(cuda::check_launch("timed region"), "timed region");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void result(const char* name, double value, const char* unit, double ratio, const char* goal) {
  std::printf("RESULT %-44s %12.3f %-8s %7.3f  %s\n", name, value, unit, ratio, goal);
  std::fflush(stdout);
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
  const double gemm_ms = median_ms([&](int) {
    check(blas.linear({.x = a.data(),
                       .w = w.data(),
                       .y = y.data(),
                       .m = n,
                       .n = n,
                       .k = n,
                       .input_type = ScalarType::kBF16,
                       .output_type = ScalarType::kBF16},
                      nullptr),
          "gemm");
  });
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
  auto time_plan = [&](const kernels::DecodeSplitPlan& pl) {
    return median_ms(
        [&](int) {
          check(kernels::launch_paged_decode_attention(p, pl,
                                                       {.partial_out = partial.as<float>(),
                                                        .partial_lse = lse.as<float>(),
                                                        .capacity_floats = ws},
                                                       nullptr),
                "decode attention");
        },
        20, 50);  // longer warm-up: the first row after the GEMM ceiling ran ~15% slow
  };
  // K and V of every sequence once (bf16), plus q in and out.
  const double bytes = 2.0 * cache_elems * 2 + 2.0 * batch * heads * d * 2;
  const double gbs = bytes / (time_plan(plan) * 1e-3) / 1e9;
  char label[96];
  std::snprintf(label, sizeof(label), "%s (splits %d)", name, plan.num_splits);
  result(label, gbs, "GB/s", gbs / ceil.bandwidth_gbs, goal);
  for (int s : sweep) {
    const kernels::DecodeSplitPlan forced{
        .num_splits = s, .partition_size = static_cast<int>((context + s - 1) / s)};
    const double g = bytes / (time_plan(forced) * 1e-3) / 1e9;
    std::snprintf(label, sizeof(label), "  sweep b%lld ctx%lld splits %d",
                  static_cast<long long>(batch), static_cast<long long>(context), s);
    result(label, g, "GB/s", g / ceil.bandwidth_gbs, "(planner check)");
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
  // Each prefill kernel on its own (kAuto above picks one of them).
  using kernels::PrefillKernel;
  const std::pair<PrefillKernel, const char*> variants[] = {
      {PrefillKernel::kReference, "G10 variant: CUDA-core reference"},
      {PrefillKernel::kMma16, "G10 variant: mma.sync 16 rows/warp"},
      {PrefillKernel::kMma32, "G10 variant: mma.sync 32 rows/warp"},
      {PrefillKernel::kMma32Keys64, "G10 variant: mma.sync 32 rows/warp, 64 keys"}};
  for (const auto& [kernel, name] : variants) {
    const bool slow = kernel == PrefillKernel::kReference;
    const double variant_ms = median_ms(
        [&](int) {
          check(kernels::launch_paged_prefill_attention(p, len, kernel, nullptr), "prefill");
        },
        slow ? 1 : 3, slow ? 3 : 20);
    const double variant_tflops = flops / (variant_ms * 1e-3) / 1e12;
    result(name, variant_tflops, "TFLOP/s", variant_tflops / ceil.tflops, "(G10 variant)");
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
        check(blas.linear({.x = x.data(),
                           .w = w[i % 4].data(),
                           .y = y.data(),
                           .m = m,
                           .n = n,
                           .k = k,
                           .input_type = ScalarType::kBF16,
                           .output_type = ScalarType::kBF16},
                          nullptr),
              "skinny gemm");
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

// `groups` empty: all; else any of decode, prefill, elementwise, sampler, skinny.
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
  }
  if (wanted("prefill")) bench_prefill_attention(ceil);
  if (wanted("elementwise")) bench_elementwise(ceil);
  if (wanted("sampler")) bench_sampler(ceil);
  if (wanted("skinny")) bench_skinny_gemm(ceil, **blas);
  return 0;
}

// Decode throughput of a whole model with random weights: prefill `context` tokens for each of
// `batch` sequences, then time decode steps (one token per sequence each).
int run_model(const std::string& config_path, ScalarType dtype, const std::vector<int>& batches,
              int context, int steps) {
  std::ifstream in(config_path);
  if (!in) {
    std::fprintf(stderr, "gpu_bench: cannot read %s\n", config_path.c_str());
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto config = model_config_from_hf_json(text.str(), config_path);
  if (!config.ok()) die(config.status(), "config");
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  const std::int64_t block_size = 16;
  const std::int64_t max_len = context + 5 * steps + 8;  // forward(), then 4 execute() runs
  const std::int64_t blocks_per_seq = (max_len + block_size - 1) / block_size;
  const std::int64_t chunk = 8192;
  // The same-run copy bandwidth that the batch-1 step is held against.
  double copy_gbs = 0.0;
  {
    const std::size_t bytes = 1ull << 30;
    DeviceBuffer src = random_buffer(static_cast<std::int64_t>(bytes / 4), ScalarType::kF32, 1);
    DeviceBuffer dst = alloc(bytes);
    const double copy_ms = median_ms(
        [&](int) { cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice); });
    copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
    result("B: device copy (1 GiB, read+write)", copy_gbs, "GB/s", 1.0, "ceiling");
  }
  const auto created = std::chrono::steady_clock::now();
  auto exec = models::CudaModelExecutor::create_dummy(*config,
                                                      {.dtype = dtype,
                                                       .max_num_batched_tokens = chunk,
                                                       .max_num_seqs = max_batch,
                                                       .max_model_len = max_len},
                                                      1234);
  if (!exec.ok()) die(exec.status(), "executor");
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - created).count();
  check((*exec)->allocate_kv_cache(max_batch * blocks_per_seq, block_size), "kv cache");
  {
    const models::DecodeGraphStats& g = (*exec)->decode_graph_stats();
    char label[96];
    std::snprintf(label, sizeof(label), "startup: dummy weights + buffers (s)");
    result(label, create_s, "s", 0.0, "(info)");
    std::snprintf(label, sizeof(label), "startup: %d decode graphs up to b%lld (s)", g.count,
                  static_cast<long long>(g.max_num_seqs));
    result(label, g.capture_seconds, "s", g.device_bytes / 1048576.0, "ratio: MiB they hold");
  }
  double weight_bytes = 0.0;
  {
    const ModelConfig& c = *config;
    const double q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
    const double per_layer = c.hidden_size * (q + 2 * kv) + q * c.hidden_size +
                             3.0 * c.hidden_size * c.intermediate_size;
    weight_bytes = (per_layer * c.num_hidden_layers + double(c.vocab_size) * c.hidden_size) *
                   cuda::scalar_type_size(dtype);
  }
  std::vector<float> logits(static_cast<std::size_t>(max_batch) * config->vocab_size);
  for (int batch : batches) {
    // Prefill every sequence's context in chunks of whole sequences.
    const int per_chunk = std::max<int>(1, static_cast<int>(chunk / context));
    for (int s0 = 0; s0 < batch; s0 += per_chunk) {
      ForwardBatch b;
      b.max_blocks_per_seq = blocks_per_seq;
      b.query_start_loc.push_back(0);
      for (int s = s0; s < std::min(batch, s0 + per_chunk); ++s) {
        for (int p = 0; p < context; ++p) {
          b.token_ids.push_back((s * 7919 + p * 31) % static_cast<int>(config->vocab_size));
          b.positions.push_back(p);
          b.slot_mapping.push_back(s * blocks_per_seq * block_size + p);
        }
        b.query_start_loc.push_back(static_cast<std::int32_t>(b.token_ids.size()));
        b.seq_lens.push_back(context);
        for (std::int64_t j = 0; j < blocks_per_seq; ++j)
          b.block_tables.push_back(static_cast<std::int32_t>(s * blocks_per_seq + j));
        b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
      }
      check((*exec)->forward(b, logits.data()), "prefill");
    }
    // One token per sequence at position context + step.
    const auto decode_batch = [&](int step) {
      ForwardBatch b;
      b.max_blocks_per_seq = blocks_per_seq;
      b.query_start_loc.push_back(0);
      for (int s = 0; s < batch; ++s) {
        const int p = context + step;
        b.token_ids.push_back((s * 131 + step * 17) % static_cast<int>(config->vocab_size));
        b.positions.push_back(p);
        b.slot_mapping.push_back(s * blocks_per_seq * block_size + p);
        b.query_start_loc.push_back(s + 1);
        b.seq_lens.push_back(p + 1);
        for (std::int64_t j = 0; j < blocks_per_seq; ++j)
          b.block_tables.push_back(static_cast<std::int32_t>(s * blocks_per_seq + j));
        b.logits_indices.push_back(s);
      }
      return b;
    };
    // The first steps warm up (plans, cuBLASLt heuristics); the median of the rest counts.
    const auto median_step_ms = [&](std::vector<double> step_ms) {
      const auto warm = static_cast<std::ptrdiff_t>(std::min(3, steps - 1));
      std::vector<double> timed(step_ms.begin() + warm, step_ms.end());
      std::sort(timed.begin(), timed.end());
      return timed[timed.size() / 2];
    };
    const ModelConfig& c = *config;
    const std::string name = config_path.substr(config_path.find_last_of('/') + 1);
    const auto report = [&](const char* how, double ms, int first_step) {
      const double kv_bytes = 2.0 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim *
                              cuda::scalar_type_size(dtype) * batch *
                              (context + first_step + steps / 2);
      char label[96];
      std::snprintf(label, sizeof(label), "decode %s b%d ctx%d (%s)", name.c_str(), batch, context,
                    how);
      result(label, batch * 1e3 / ms, "tok/s", (weight_bytes + kv_bytes) / (ms * 1e-3) / 1e9,
             "ratio: (weights+KV) GB/s; compare with B");
    };

    // forward(): every row's logits to the host, as before sampling moved to the device.
    (*exec)->set_graphs_enabled(false);
    kernels::set_pdl_enabled(false);
    std::vector<double> step_ms;
    for (int step = 0; step < steps; ++step) {
      const ForwardBatch b = decode_batch(step);
      cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      check((*exec)->forward(b, logits.data()), "decode");  // ends with a stream sync
      step_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    report("eager, host step", median_step_ms(step_ms), 0);

    // execute(): sampled on the device (top-k 50, top-p 0.95, presence penalty), ids back;
    // eager, then replaying the decode graphs.
    SlotSamplingConfig slot_config;
    slot_config.presence_penalty = 0.2f;
    for (int s = 0; s < batch; ++s) check((*exec)->open_sampling_slot(s, slot_config), "slot");
    std::int64_t d2h_bytes = 0;
    StepOutput out;
    // Eager without and with programmatic dependent launch (PDL), then the graphs with and
    // without it (recaptured: a graph holds its launches' attributes). The first is the
    // executor before graphs and PDL; the third what it runs now.
    struct Variant {
      const char* name;
      bool graphs;
      bool pdl;
    };
    const Variant variants[] = {{"execute, eager", false, false},
                                {"execute, eager + PDL", false, true},
                                {"execute, CUDA graphs + PDL", true, true},
                                {"execute, CUDA graphs", true, false}};
    double baseline_ms = 0.0;
    int first = steps;
    for (const Variant& v : variants) {
      kernels::set_pdl_enabled(v.pdl);
      if (v.graphs && !v.pdl) check((*exec)->capture_decode_graphs(), "recapture");
      (*exec)->set_graphs_enabled(v.graphs);
      step_ms.clear();
      for (int step = first; step < first + steps; ++step) {
        const ForwardBatch b = decode_batch(step);
        SamplingBatch sampling;
        for (int s = 0; s < batch; ++s) {
          sampling.rows.push_back({.slot = s,
                                   .temperature = 0.8f,
                                   .top_k = 50,
                                   .top_p = 0.95f,
                                   .seed = static_cast<std::uint64_t>(s),
                                   .position = step});
        }
        cudaDeviceSynchronize();
        const auto t0 = std::chrono::steady_clock::now();
        check((*exec)->execute(b, sampling, out), "decode");  // ends with a stream sync
        step_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        d2h_bytes = (*exec)->last_step_d2h_bytes();
      }
      const double ms = median_step_ms(step_ms);
      report(v.name, ms, first);
      first += steps;
      char label[96];
      if (baseline_ms == 0.0) {
        baseline_ms = ms;
      } else {
        std::snprintf(label, sizeof(label), "G15 %s vs eager b%d", v.name + 9, batch);
        result(label, ms, "ms", baseline_ms / ms, "ratio: eager step time / this one");
      }
      if (batch == 1) {
        std::snprintf(label, sizeof(label), "decode b1 weight bytes / step (%s)", v.name + 9);
        const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
        result(label, gbs, "GB/s", gbs / copy_gbs, ">= 0.85 B (graphs + PDL)");
      }
    }
    // Back to what the executor runs by default, for the next batch size.
    kernels::set_pdl_enabled(true);
    check((*exec)->capture_decode_graphs(), "recapture");
    (*exec)->set_graphs_enabled(true);
    for (int s = 0; s < batch; ++s) (*exec)->close_sampling_slot(s);
    char label[96];
    std::snprintf(label, sizeof(label), "d2h bytes per decode step, execute() b%d", batch);
    result(label, static_cast<double>(d2h_bytes), "B",
           d2h_bytes / (static_cast<double>(batch) * c.vocab_size * sizeof(float)),
           "ratio: / forward()'s logits copy");
  }
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
