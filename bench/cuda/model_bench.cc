#include "bench/cuda/model_bench.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cuda/bench_util.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/pdl.cuh"
#include "model/hf_config.h"
#include "models/cuda_model_executor.h"
#include "pagoda/forward_batch.h"
#include "pagoda/step_sampling.h"

namespace pagoda::bench {

// Decode throughput of a whole model with random weights: prefill `context` tokens for each of
// `batch` sequences, then time decode steps (one token per sequence each).
int run_model(const std::string& config_path, ScalarType dtype, const std::vector<int>& batches,
              int context, int steps, quant::LoadTimeQuantization quantization, bool fp8_kv_cache) {
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
  // Each sequence decodes `steps` positions per run: forward(), the execute() variants below,
  // then the mixed-step runs (which repeat one set of positions).
  constexpr int kExecuteVariants = 8;
  // The mixed-step runs add a prompt chunk of this many tokens as one more sequence.
  constexpr int kChunkTokens = 512;
  const std::int64_t max_len =
      std::max<std::int64_t>(context + (1 + kExecuteVariants + 1) * steps + 8, kChunkTokens);
  const std::int64_t blocks_per_seq = (max_len + block_size - 1) / block_size;
  const std::int64_t chunk = 8192;
  // The same-run copy bandwidth that the batch-1 step is held against.
  double copy_gbs = 0.0;
  {
#if defined(PAGODA_CUDA_EMULATION)
    // The emulation's copy tells nothing of a GPU: a small one keeps its rehearsal short.
    const std::size_t bytes = 64ull << 20;
    const char* label = "B: device copy (64 MiB, read+write; emulated)";
#else
    const std::size_t bytes = 1ull << 30;
    const char* label = "B: device copy (1 GiB, read+write)";
#endif
    DeviceBuffer src = random_buffer(static_cast<std::int64_t>(bytes / 4), ScalarType::kF32, 1);
    DeviceBuffer dst = alloc(bytes);
    const double copy_ms = median_ms(
        [&](int) { cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice); });
    copy_gbs = 2.0 * bytes / (copy_ms * 1e-3) / 1e9;
    result(label, copy_gbs, "GB/s", 1.0, "ceiling");
  }
  const auto created = std::chrono::steady_clock::now();
  auto exec = models::CudaModelExecutor::create_dummy(
      *config,
      {.dtype = dtype,
       .max_num_batched_tokens = chunk,
       .max_num_seqs = max_batch + 1,
       .max_model_len = max_len,
       .quantization = quantization,
       .kv_cache_storage = fp8_kv_cache ? kernels::KvCacheStorage::kFp8E4M3
                                        : kernels::KvCacheStorage::kActivations},
      1234);
  if (!exec.ok()) die(exec.status(), "executor");
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - created).count();
  // One more sequence than the largest batch: the mixed step's prompt chunk.
  check((*exec)->allocate_kv_cache((max_batch + 1) * blocks_per_seq, block_size), "kv cache");
  {
    const models::DecodeGraphStats& g = (*exec)->decode_graph_stats();
    char label[96];
    std::snprintf(label, sizeof(label), "startup: dummy weights%s + buffers (s)",
                  quantization == quant::LoadTimeQuantization::kNone ? "" : ", quantized at load");
    const std::string weights = "ratio: GiB of weights (" + (*exec)->weights_summary() + ")";
    result(label, create_s, "s", (*exec)->weight_bytes() / 1073741824.0, weights.c_str());
    std::snprintf(label, sizeof(label), "startup: %d decode graphs up to b%lld (s)", g.count,
                  static_cast<long long>(g.max_num_seqs));
    result(label, g.capture_seconds, "s", g.device_bytes / 1048576.0, "ratio: MiB they hold");
  }
  // The bytes a decode step streams: every weight on the device as it is stored there (bf16,
  // FP8 codes and row scales, W4A16 nibbles and group scales), less the embedding when it is not
  // also the LM head (a step reads one row of it).
  double weight_bytes = static_cast<double>((*exec)->weight_bytes());
  if (!config->tie_word_embeddings) {
    weight_bytes -=
        double(config->vocab_size) * config->hidden_size * cuda::scalar_type_size(dtype);
  }
  std::string precision;
  if (quantization != quant::LoadTimeQuantization::kNone) {
    precision += " " + std::string(quant::load_time_quantization_name(quantization)) + "-w";
  }
  if (fp8_kv_cache) precision += " fp8-kv";
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
                              (fp8_kv_cache ? 1 : cuda::scalar_type_size(dtype)) * batch *
                              (context + first_step + steps / 2);
      char label[128];
      std::snprintf(label, sizeof(label), "decode %s%s b%d ctx%d (%s)", name.c_str(),
                    precision.c_str(), batch, context, how);
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
    // The last three run what the third does with each decode attention kernel by name (kAuto
    // is the tensor-core one over a 16-bit cache, the pipelined one over FP8).
    struct Variant {
      const char* name;
      bool graphs;
      bool pdl;
      kernels::DecodeKernel attention = kernels::DecodeKernel::kAuto;
    };
    const Variant variants[] = {{"execute, eager", false, false},
                                {"execute, eager + PDL", false, true},
                                {"execute, CUDA graphs + PDL", true, true},
                                {"execute, CUDA graphs", true, false},
                                {"execute, CUDA graphs + PDL, register attn", true, true,
                                 kernels::DecodeKernel::kRegisters},
                                {"execute, CUDA graphs + PDL, pipelined attn", true, true,
                                 kernels::DecodeKernel::kPipelined},
                                {"execute, CUDA graphs + PDL, tensor-core attn", true, true,
                                 kernels::DecodeKernel::kTensorCores},
                                // Over an FP8 cache its direct variant; over 16 bits the same.
                                {"execute, CUDA graphs + PDL, tensor-core direct attn", true, true,
                                 kernels::DecodeKernel::kTensorCoresDirect}};
    static_assert(sizeof(variants) / sizeof(variants[0]) == kExecuteVariants,
                  "max_len counts the execute() variants");
    double baseline_ms = 0.0;
    int first = steps;
    for (const Variant& v : variants) {
      kernels::set_pdl_enabled(v.pdl);
      kernels::set_default_decode_kernel(v.attention);
      if (v.graphs && (!v.pdl || v.attention != kernels::DecodeKernel::kAuto)) {
        check((*exec)->capture_decode_graphs(), "recapture");
      }
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
        // The last eager step is the profiler's range: `ncu --profile-from-start off` sees one
        // decode step's kernels and none of the prefill's (a no-op without a profiler).
        const bool profiled = &v == &variants[0] && step == first + steps - 1;
        cudaDeviceSynchronize();
        if (profiled) cudaProfilerStart();
        const auto t0 = std::chrono::steady_clock::now();
        check((*exec)->execute(b, sampling, out), "decode");  // ends with a stream sync
        if (profiled) cudaProfilerStop();
        step_ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
        d2h_bytes = (*exec)->last_step_d2h_bytes();
      }
      const double ms = median_step_ms(step_ms);
      report(v.name, ms, first);
      first += steps;
      char label[128];
      if (baseline_ms == 0.0) {
        baseline_ms = ms;
      } else {
        std::snprintf(label, sizeof(label), "G15 %s vs eager b%d", v.name + 9, batch);
        result(label, ms, "ms", baseline_ms / ms, "ratio: eager step time / this one");
      }
      if (batch == 1) {
        std::snprintf(label, sizeof(label), "decode b1%s weight bytes / step (%s)",
                      precision.c_str(), v.name + 9);
        const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
        result(label, gbs, "GB/s", gbs / copy_gbs, ">= 0.85 B (graphs + PDL)");
      }
    }
    // A mixed step: the batch's decodes beside a 512-token prompt chunk of one more sequence
    // (slot `batch`, its own blocks), eager with PDL, against the chunk alone and the decodes
    // alone; the decodes' share of it over their own step says what mixing costs them. Timed
    // both ways on one executor: split (the prefill kernel skips the one-query sequences, the
    // decode kernel runs them: what the executor does) and unsplit (every sequence's attention
    // through the prefill kernel, as in run 27: 3.3x at b256 on the H200).
    {
      kernels::set_pdl_enabled(true);
      kernels::set_default_decode_kernel(kernels::DecodeKernel::kAuto);
      (*exec)->set_graphs_enabled(false);
      const int extra = batch;
      check((*exec)->open_sampling_slot(extra, slot_config), "slot");
      const auto add_chunk = [&](ForwardBatch& b) {
        for (int p = 0; p < kChunkTokens; ++p) {
          b.token_ids.push_back((extra * 7919 + p * 31) % static_cast<int>(c.vocab_size));
          b.positions.push_back(p);
          b.slot_mapping.push_back(
              static_cast<std::int32_t>(extra * blocks_per_seq * block_size + p));
        }
        b.query_start_loc.push_back(static_cast<std::int32_t>(b.token_ids.size()));
        b.seq_lens.push_back(kChunkTokens);
        for (std::int64_t j = 0; j < blocks_per_seq; ++j)
          b.block_tables.push_back(static_cast<std::int32_t>(extra * blocks_per_seq + j));
        b.logits_indices.push_back(static_cast<std::int32_t>(b.token_ids.size()) - 1);
      };
      enum class Part { kDecodes, kChunk, kMixed, kMixedUnsplit };
      const auto time_part = [&](Part part) {
        std::vector<double> part_ms;
        for (int step = first; step < first + steps; ++step) {
          ForwardBatch b;
          if (part == Part::kChunk) {
            b.max_blocks_per_seq = blocks_per_seq;
            b.query_start_loc.push_back(0);
          } else {
            b = decode_batch(step);
          }
          if (part != Part::kDecodes) add_chunk(b);
          SamplingBatch sampling;
          const auto row = [&](int slot) {
            sampling.rows.push_back({.slot = slot,
                                     .temperature = 0.8f,
                                     .top_k = 50,
                                     .top_p = 0.95f,
                                     .seed = static_cast<std::uint64_t>(slot),
                                     .position = step});
          };
          if (part != Part::kChunk) {
            for (int s = 0; s < batch; ++s) row(s);
          }
          if (part != Part::kDecodes) row(extra);
          (*exec)->set_split_mixed_steps(part != Part::kMixedUnsplit);
          cudaDeviceSynchronize();
          const auto t0 = std::chrono::steady_clock::now();
          check((*exec)->execute(b, sampling, out), "mixed");
          part_ms.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
        return median_step_ms(part_ms);
      };
      const double decodes_ms = time_part(Part::kDecodes);
      const double chunk_ms = time_part(Part::kChunk);
      const std::int64_t mixed_before = (*exec)->attention_path_counts().mixed;
      const double mixed_ms = time_part(Part::kMixed);
      const std::int64_t mixed_launches = (*exec)->attention_path_counts().mixed - mixed_before;
      const double unsplit_ms = time_part(Part::kMixedUnsplit);
      (*exec)->set_split_mixed_steps(true);
      first += steps;
      if (mixed_launches != static_cast<std::int64_t>(steps) * c.num_hidden_layers) {
        std::fprintf(stderr,
                     "gpu_bench: the mixed steps took the split attention path %lld times, "
                     "not %lld\n",
                     static_cast<long long>(mixed_launches),
                     static_cast<long long>(steps) * c.num_hidden_layers);
      }
      (*exec)->close_sampling_slot(extra);
      char label[96];
      std::snprintf(label, sizeof(label), "decodes alone b%d (eager + PDL)", batch);
      result(label, decodes_ms, "ms", 0.0, "(info)");
      std::snprintf(label, sizeof(label), "a %d-token prompt chunk alone (eager + PDL)",
                    kChunkTokens);
      result(label, chunk_ms, "ms", 0.0, "(info)");
      std::snprintf(label, sizeof(label), "mixed: b%d decodes + the chunk in one step (split)",
                    batch);
      result(label, mixed_ms, "ms", (mixed_ms - chunk_ms) / decodes_ms,
             "ratio: (mixed - chunk) / decodes alone");
      std::snprintf(label, sizeof(label), "mixed unsplit: all through the prefill kernel b%d",
                    batch);
      result(label, unsplit_ms, "ms", (unsplit_ms - chunk_ms) / decodes_ms,
             "ratio: (mixed - chunk) / decodes alone");
      std::snprintf(label, sizeof(label), "mixed step b%d: unsplit / split", batch);
      result(label, mixed_ms, "ms", unsplit_ms / mixed_ms, "ratio: the split's speed-up");
    }

    // Back to what the executor runs by default, for the next batch size.
    kernels::set_pdl_enabled(true);
    kernels::set_default_decode_kernel(kernels::DecodeKernel::kAuto);
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

}  // namespace pagoda::bench
