// GPU benchmarks, every figure a ratio to ceilings measured in the same run (shared/GPU.md):
//   B = device-to-device copy bandwidth (bytes read + written), 1 GiB buffer;
//   F = cuBLASLt BF16 GEMM TFLOP/s at 8192^3 on random data.
// Kernel timings: CUDA events, warm-up, median of repeats; inputs larger than L2 or rotated.
//
//   gpu_bench kernels                     B, F and each kernel against its goal, the sampler of
//                                         execute() per batch x vocab ("sampler ..." lines)
//   gpu_bench kernels [GROUP...]          GROUP: decode, prefill, elementwise, sampler, skinny,
//                                         w4a16, gguf, fp8
//   gpu_bench model --config FILE.json    decode tokens/s with random weights (--load-format dummy;
//                                         --quantization fp8|int4, --kv-cache-dtype fp8)
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
#include "bench/cuda/attention_bench.h"
#include "bench/cuda/bench_util.h"
#include "bench/cuda/model_bench.h"
#include "bench/cuda/quant_gemm_bench.h"
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
#include "quant/load_time_quantization.h"

namespace pagoda::bench {
namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

Ceilings measure_ceilings(cuda::BlasLt& blas) {
  Ceilings c;
  const std::size_t bytes = 1ull << 30;
  DeviceBuffer src = random_buffer(static_cast<std::int64_t>(bytes / 4), ScalarType::kF32, 1);
  DeviceBuffer dst = alloc(bytes);
  const double copy_ms = median_ms(
      [&](int) { cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice); });
  c.bandwidth_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
  result("B: device copy (1 GiB, read+write)", c.bandwidth_gbs, "GB/s", 1.0, "ceiling");
  // Kernel times leave this out since run 30 (bench_util.h's median_ms); run 29's included it.
  result("launch latency per-launch timing added", launch_latency_us(), "us", 0.0,
         "(info: in kernel times through run 29)");

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
    // Run 28: 32 splits beat the planner's 64 for every kernel (tensor cores 0.56 against 0.50 B);
    // the sweeps find where each kernel's best split count sits before the planner changes.
    bench_decode_attention(ceil, props->num_sms, 1, 16384, "G3 decode attn b1 ctx16k", ">= 0.70 B",
                           {16, 24, 32, 48, 64, 128});
    bench_decode_attention(ceil, props->num_sms, 16, 4096, "decode attn b16 ctx4096", "(info)",
                           {2, 3, 4, 5, 8});
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
  if (wanted("fp8")) {
    bench_fp8_decode(ceil, **blas);
    bench_fp8(ceil, **blas);
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
    std::string quantization_name = "none";
    std::string kv_cache_dtype = "auto";
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
      else if (flag == "--quantization")
        quantization_name = value;
      else if (flag == "--kv-cache-dtype")
        kv_cache_dtype = value;
    }
    cuda::ScalarType dtype;
    const auto quantization = quant::parse_load_time_quantization(quantization_name);
    if (config.empty() || !cuda::parse_scalar_type(dtype_name, &dtype) || context < 1 ||
        steps < 2 || !quantization.ok() || (kv_cache_dtype != "auto" && kv_cache_dtype != "fp8")) {
      std::fprintf(stderr,
                   "usage: gpu_bench model --config FILE.json [--dtype bf16] "
                   "[--batch 1,64,128] [--context 512] [--steps 32] [--quantization none|fp8|int4] "
                   "[--kv-cache-dtype auto|fp8]\n");
      return 2;
    }
    return bench::run_model(config, dtype, bench::parse_list(batches), context, steps,
                            *quantization, kv_cache_dtype == "fp8");
  }
  std::fprintf(stderr, "usage: gpu_bench kernels | gpu_bench model --config FILE.json ...\n");
  return 2;
}
