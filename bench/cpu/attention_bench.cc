// Paged attention at SmolLM2-135M head shapes (9 q heads, 3 kv heads, head_dim 64), block 16:
// decode (one query per sequence) against a context, and a whole-prompt prefill.
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "backend/cpu/paged_attention.h"

namespace pagoda::cpu::bench {
namespace {

constexpr std::int64_t kHeads = 9;
constexpr std::int64_t kKvHeads = 3;
constexpr std::int64_t kHeadDim = 64;
constexpr std::int64_t kBlockSize = 16;

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

// num_seqs sequences of context tokens each, q_len new queries each; reference=1 runs the
// double-precision oracle instead.
void run(benchmark::State& state, std::int64_t num_seqs, std::int64_t context, std::int64_t q_len,
         bool reference) {
  const std::int64_t blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  const std::int64_t num_blocks = num_seqs * blocks_per_seq;
  const std::size_t pool_floats =
      static_cast<std::size_t>(num_blocks * kBlockSize * kKvHeads * kHeadDim);
  std::vector<float> k(pool_floats, 0.01f), v(pool_floats, 0.02f);
  const KvCacheView cache{k.data(), v.data(), num_blocks, kBlockSize, kKvHeads, kHeadDim};
  std::vector<std::int32_t> tables(static_cast<std::size_t>(num_blocks));
  std::iota(tables.begin(), tables.end(), 0);
  std::vector<std::int32_t> starts(static_cast<std::size_t>(num_seqs + 1));
  std::vector<std::int32_t> lens(static_cast<std::size_t>(num_seqs),
                                 static_cast<std::int32_t>(context));
  for (std::int64_t s = 0; s <= num_seqs; ++s)
    starts[static_cast<std::size_t>(s)] = static_cast<std::int32_t>(s * q_len);
  const AttentionBatch batch{starts.data(), lens.data(), tables.data(), num_seqs, blocks_per_seq};
  std::vector<float> q(static_cast<std::size_t>(num_seqs * q_len * kHeads * kHeadDim), 0.1f);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    if (reference) {
      paged_attention_reference(q.data(), kHeads, cache, batch, out.data());
    } else {
      paged_attention(pool(), q.data(), kHeads, cache, batch, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  // K and V bytes the queries read (each KV head once per query tile).
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * num_seqs * context *
                          kKvHeads * kHeadDim * 8);
}

// Args: num_seqs, context, reference.
void BM_AttentionDecode(benchmark::State& state) {
  run(state, state.range(0), state.range(1), 1, state.range(2) != 0);
}
BENCHMARK(BM_AttentionDecode)
    ->Args({1, 512, 0})
    ->Args({1, 2048, 0})
    ->Args({8, 2048, 0})
    ->Args({16, 192, 0})  // The 16-way decode step of docs/perf/cpu.md, one layer.
    ->Args({1, 2048, 1})
    ->UseRealTime();

// Args: prompt length, reference.
void BM_AttentionPrefill(benchmark::State& state) {
  run(state, 1, state.range(0), state.range(0), state.range(1) != 0);
}
BENCHMARK(BM_AttentionPrefill)
    ->Args({512, 0})
    ->Args({512, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda::cpu::bench
