// Scheduler and KV-manager costs on the host, per engine step: these run between forward passes,
// so they must stay small next to a decode step of a small model (~ms).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/block_hash.h"
#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"

namespace pagoda::engine {
namespace {

std::vector<std::int32_t> prompt_of(std::int64_t n, std::int32_t salt) {
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    prompt[i] = static_cast<std::int32_t>((i * 31 + salt) % 32000);
  return prompt;
}

// One decode step (schedule + update) with 256 running requests. Arg: prefix caching on/off.
void BM_SchedulerDecodeStep256(benchmark::State& state) {
  constexpr int kRequests = 256;
  constexpr std::int64_t kPrompt = 128;
  constexpr std::int64_t kSteps = 4000;
  SchedulerConfig config;
  config.max_num_seqs = kRequests;
  config.max_num_batched_tokens = 8192;
  config.max_model_len = kPrompt + kSteps + 16;
  CacheConfig cache;
  cache.block_size = 16;
  cache.enable_prefix_caching = state.range(0) != 0;
  cache.num_blocks = kRequests * ((config.max_model_len + 15) / 16);
  Scheduler scheduler(config, cache);
  for (int r = 0; r < kRequests; ++r) {
    RequestOptions options;
    options.max_tokens = kSteps + 8;
    auto request = std::make_unique<Request>("req-" + std::to_string(r), prompt_of(kPrompt, r),
                                             std::move(options));
    if (!scheduler.add_request(std::move(request)).ok()) state.SkipWithError("add_request");
  }
  SampledTokens sampled;
  auto run_step = [&] {
    const SchedulerOutput out = scheduler.schedule();
    sampled.token_ids.resize(out.requests.size());
    for (auto& t : sampled.token_ids) t.assign(1, 7);
    benchmark::DoNotOptimize(scheduler.update_from_output(out, sampled));
  };
  // Prefill everyone first so that the timed steps are pure decode.
  while (scheduler.stats().num_running < kRequests ||
         scheduler.find_request("req-255")->num_output_tokens() == 0) {
    run_step();
  }
  for (auto _ : state) run_step();
  state.SetItemsProcessed(state.iterations() * kRequests);
}
BENCHMARK(BM_SchedulerDecodeStep256)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(2000)
    ->Unit(benchmark::kMicrosecond);

// Admission of a 2048-token prompt: hashing its 128 blocks, lookup, allocation, free.
// Arg 0: every prompt unique (all misses); Arg 1: the same prompt (all but the last block hit).
void BM_AdmitPrompt2048(benchmark::State& state) {
  constexpr std::int64_t kTokens = 2048;
  CacheConfig cache;
  cache.num_blocks = 4096;
  KvCacheManager kv(cache);
  const bool shared = state.range(0) != 0;
  const std::vector<std::int32_t> prompt = prompt_of(kTokens, 1);
  std::int64_t n = 0;
  for (auto _ : state) {
    RequestOptions options;
    if (!shared) options.cache_salt = std::to_string(n++);
    Request request("r", prompt, std::move(options));
    kv.update_block_hashes(request);
    const ComputedBlocks hits = kv.get_computed_blocks(request);
    benchmark::DoNotOptimize(kv.allocate_slots(request, kTokens - hits.num_tokens, hits));
    kv.free(request);
  }
  state.SetItemsProcessed(state.iterations() * kTokens);
}
BENCHMARK(BM_AdmitPrompt2048)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// One prefix-cache key over a 16-token block.
void BM_HashBlock16(benchmark::State& state) {
  const std::vector<std::int32_t> tokens = prompt_of(16, 3);
  BlockHash parent = root_block_hash(0, "");
  for (auto _ : state) {
    parent = hash_block(parent, tokens);
    benchmark::DoNotOptimize(parent);
  }
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_HashBlock16);

}  // namespace
}  // namespace pagoda::engine
