// Sampling one decode step's logits, 16 rows x the default model's 49,152 tokens: HostSampler
// (rows over a thread pool, the Gumbel race) against the per-request path it replaced, a Sampler
// per request and then compute_logprobs, row after row on the engine thread.
// Figures and commands: docs/perf/sampling.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "pagoda/sampling_params.h"
#include "sampling/host_sampler.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace pagoda::sampling {
namespace {

constexpr std::int64_t kVocab = 49152;
constexpr std::int64_t kRows = 16;

// Arg 0 of every case.
enum Mode : std::int64_t { kGreedy, kTemperature, kTopP, kTopK };

const char* mode_label(std::int64_t mode) {
  static constexpr const char* kLabels[] = {"greedy", "temperature 0.8", "top_p 0.9", "top_k 50"};
  return kLabels[mode];
}

// Normal logits (sd 4, as bench/sampling); `peaked` adds 64 tokens 8-16 above the rest, closer
// to a language model's row, where the race skips most of the vocabulary.
std::vector<float> random_logits(bool peaked) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, peaked ? 2.0f : 4.0f);
  std::vector<float> logits(static_cast<std::size_t>(kRows * kVocab));
  for (float& l : logits) l = normal(rng);
  if (peaked) {
    std::uniform_int_distribution<std::int64_t> token(0, kRows * kVocab - 1);
    std::uniform_real_distribution<float> lift(8.0f, 16.0f);
    for (int i = 0; i < 64 * kRows; ++i) logits[static_cast<std::size_t>(token(rng))] += lift(rng);
  }
  return logits;
}

SamplingRow row_for(std::int64_t mode) {
  SamplingRow row;
  row.temperature = mode == kGreedy ? 0.0f : 0.8f;
  if (mode == kTopP) row.top_p = 0.9f;
  if (mode == kTopK) row.top_k = 50;
  return row;
}

SamplingParams params_for(std::int64_t mode, std::uint64_t seed) {
  SamplingParams params;
  params.temperature = mode == kGreedy ? 0.0 : 0.8;
  if (mode == kTopP) params.top_p = 0.9;
  if (mode == kTopK) params.top_k = 50;
  params.seed = seed;
  return params;
}

void run_host_sampler(benchmark::State& state, bool peaked) {
  const std::int64_t mode = state.range(0);
  const auto threads = static_cast<int>(state.range(1));
  const std::vector<float> logits = random_logits(peaked);
  HostSampler sampler(kVocab);
  SamplingBatch batch;
  for (std::int32_t r = 0; r < kRows; ++r) {
    if (!sampler.open_slot(r, {}).ok()) state.SkipWithError("open_slot");
    SamplingRow row = row_for(mode);
    row.slot = r;
    row.seed = static_cast<std::uint64_t>(r);
    row.num_logprobs = static_cast<std::int32_t>(state.range(2));
    batch.rows.push_back(row);
  }
  const auto pool = threads > 1 ? std::make_unique<cpu::ThreadPool>(threads) : nullptr;
  StepOutput out;
  std::int64_t position = 0;
  for (auto _ : state) {
    for (SamplingRow& row : batch.rows) row.position = position;
    ++position;
    sampler.sample(logits, batch, pool.get(), out);
    benchmark::DoNotOptimize(out.token_ids.data());
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetLabel(mode_label(mode));
}

// Args: mode, threads (1: no pool), num_logprobs (-1: none).
void BM_HostSampler(benchmark::State& state) {
  run_host_sampler(state, false);
}
BENCHMARK(BM_HostSampler)
    ->ArgsProduct({{kGreedy, kTemperature, kTopP, kTopK}, {1, 2}, {-1, 5}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_HostSamplerPeaked(benchmark::State& state) {
  run_host_sampler(state, true);
}
BENCHMARK(BM_HostSamplerPeaked)
    ->ArgsProduct({{kTemperature, kTopP}, {1}, {-1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// The path before: a Sampler per request (stages over a copy of the row, an inverse-CDF draw),
// accept(), then compute_logprobs when asked. Args: mode, num_logprobs (-1: none).
void BM_PerRequestSampler(benchmark::State& state) {
  const std::int64_t mode = state.range(0);
  const std::int64_t num_logprobs = state.range(1);
  const std::vector<float> logits = random_logits(false);
  std::vector<Sampler> samplers;
  samplers.reserve(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) {
    samplers.emplace_back(params_for(mode, static_cast<std::uint64_t>(r)));
  }
  SampledLogprobs logprobs;
  for (auto _ : state) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::span<const float> row(logits.data() + r * kVocab, kVocab);
      const std::int32_t token = samplers[static_cast<std::size_t>(r)].sample(row);
      samplers[static_cast<std::size_t>(r)].accept(token);
      if (num_logprobs >= 0) compute_logprobs(row, token, num_logprobs, logprobs);
      benchmark::DoNotOptimize(token);
    }
  }
  state.SetItemsProcessed(state.iterations() * kRows);
  state.SetLabel(mode_label(mode));
}
BENCHMARK(BM_PerRequestSampler)
    ->ArgsProduct({{kGreedy, kTemperature, kTopP, kTopK}, {-1, 5}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda::sampling
