// One decode step of the whole model (CpuModelExecutor::forward) with S sequences at a context of
// C tokens: what `pagoda bench offline`'s steady-state ITL measures, without the engine around
// it. Each sequence owns its own blocks, handed out interleaved across sequences as a running
// engine's pool does, so K/V reads come from DRAM as they would in serving.
//
//   ./pagoda_bench_model_step --benchmark_filter='BM_DecodeStep/16/160'
//   args: sequences, context, threads, KV dtype (0 fp32, 1 fp16); $PAGODA_MODEL picks the GGUF.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/cpu_model_executor.h"

namespace pagoda {
namespace {

constexpr std::int64_t kBlockSize = 16;

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

std::string model_path() {
  const char* env = std::getenv("PAGODA_MODEL");
  return env != nullptr ? env : "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Sequence s's position p lives in block (p / kBlockSize) * num_seqs + s.
void fill_batch(std::int64_t num_seqs, std::int64_t first, std::int64_t count,
                std::int64_t max_blocks, std::mt19937& rng, ForwardBatch& batch) {
  batch.clear();
  batch.query_start_loc.push_back(0);
  batch.max_blocks_per_seq = max_blocks;
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    for (std::int64_t p = first; p < first + count; ++p) {
      batch.token_ids.push_back(static_cast<std::int32_t>(rng() % 49152));
      batch.positions.push_back(static_cast<std::int32_t>(p));
      batch.slot_mapping.push_back(((p / kBlockSize) * num_seqs + s) * kBlockSize + p % kBlockSize);
    }
    batch.query_start_loc.push_back(static_cast<std::int32_t>(batch.token_ids.size()));
    batch.seq_lens.push_back(static_cast<std::int32_t>(first + count));
    for (std::int64_t b = 0; b < max_blocks; ++b) {
      batch.block_tables.push_back(static_cast<std::int32_t>(b * num_seqs + s));
    }
    batch.logits_indices.push_back(static_cast<std::int32_t>(batch.token_ids.size()) - 1);
  }
}

void BM_DecodeStep(benchmark::State& state) {
  const std::int64_t num_seqs = state.range(0);
  const std::int64_t context = state.range(1);
  auto files = open_model_files(model_path());
  if (!files.ok()) {
    state.SkipWithError(files.status().to_string().c_str());
    return;
  }
  auto executor = models::CpuModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.num_threads = static_cast<int>(state.range(2)),
       .max_num_batched_tokens = num_seqs * context,
       .max_model_len = context + 1,
       .kv_cache_dtype = state.range(3) != 0 ? cpu::KvDtype::kF16 : cpu::KvDtype::kF32});
  if (!executor.ok()) {
    state.SkipWithError(executor.status().to_string().c_str());
    return;
  }
  const std::int64_t max_blocks = (context + 1 + kBlockSize - 1) / kBlockSize;
  Status s = (*executor)->allocate_kv_cache(max_blocks * num_seqs, kBlockSize);
  if (!s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  std::mt19937 rng(7);
  ForwardBatch batch;
  std::vector<float> logits(static_cast<std::size_t>(num_seqs * 49152));
  // Prefill the first context - 1 tokens once; every timed step then decodes position
  // context - 1 again (same bytes read as a step at that context).
  fill_batch(num_seqs, 0, context - 1, max_blocks, rng, batch);
  s = (*executor)->forward(batch, logits.data());
  if (!s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  fill_batch(num_seqs, context - 1, 1, max_blocks, rng, batch);
  // The setup above takes seconds, so the spread is measured within one run: the machine is
  // shared, and the minimum and median step say more than the mean.
  std::vector<double> steps;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    s = (*executor)->forward(batch, logits.data());
    steps.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    benchmark::DoNotOptimize(logits.data());
  }
  std::sort(steps.begin(), steps.end());
  state.counters["min_ms"] = steps.front();
  state.counters["p50_ms"] = steps[steps.size() / 2];
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(num_seqs),
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeStep)
    ->ArgNames({"seqs", "context", "threads", "f16"})
    ->ArgsProduct({{1, 16}, {160}, {1, 2}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// A whole prompt's prefill, in chunks of at most 2,048 tokens (the default step token budget),
// as the first steps of a served request run it. The counters divide the process's CPU time (all
// threads, so a machine shared with other work counts only this process) and the wall time by
// the prompt's tokens: "server CPU per prompt token" without the
// engine around it. Args: prompt tokens, threads, KV dtype (0 fp32, 1 fp16).
//
//   ./pagoda_bench_model_step --benchmark_filter='BM_PrefillStep/prompt:4096/'
void BM_PrefillStep(benchmark::State& state) {
  constexpr std::int64_t kChunk = 2048;
  const std::int64_t prompt = state.range(0);
  auto files = open_model_files(model_path());
  if (!files.ok()) {
    state.SkipWithError(files.status().to_string().c_str());
    return;
  }
  auto executor = models::CpuModelExecutor::create(
      std::make_shared<const ModelFiles>(std::move(*files)),
      {.num_threads = static_cast<int>(state.range(1)),
       .max_num_batched_tokens = kChunk,
       .max_model_len = prompt + 1,
       .kv_cache_dtype = state.range(2) != 0 ? cpu::KvDtype::kF16 : cpu::KvDtype::kF32});
  if (!executor.ok()) {
    state.SkipWithError(executor.status().to_string().c_str());
    return;
  }
  const std::int64_t max_blocks = (prompt + kBlockSize - 1) / kBlockSize;
  Status s = (*executor)->allocate_kv_cache(max_blocks, kBlockSize);
  if (!s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  std::mt19937 rng(7);
  std::vector<ForwardBatch> chunks;
  for (std::int64_t first = 0; first < prompt; first += kChunk) {
    chunks.emplace_back();
    fill_batch(1, first, std::min(kChunk, prompt - first), max_blocks, rng, chunks.back());
  }
  std::vector<float> logits(49152);
  // One untimed run first: it touches the KV cache and activation pages for the first time.
  for (const ForwardBatch& chunk : chunks) s = (*executor)->forward(chunk, logits.data());
  // Per run: wall and process CPU milliseconds; the medians are reported.
  std::vector<double> wall, cpu;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_ms();
    for (const ForwardBatch& chunk : chunks) {
      s = (*executor)->forward(chunk, logits.data());
      if (!s.ok()) {
        state.SkipWithError(s.to_string().c_str());
        return;
      }
    }
    cpu.push_back(process_cpu_ms() - cpu_start);
    wall.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    benchmark::DoNotOptimize(logits.data());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  const auto tokens = static_cast<double>(prompt);
  state.counters["wall_ms/token"] = wall[wall.size() / 2] / tokens;
  state.counters["cpu_ms/token"] = cpu[cpu.size() / 2] / tokens;
}
BENCHMARK(BM_PrefillStep)
    ->ArgNames({"prompt", "threads", "f16"})
    ->ArgsProduct({{256, 1024, 4096}, {2}, {0}})
    ->MeasureProcessCPUTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda
