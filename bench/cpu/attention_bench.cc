// Paged attention at SmolLM2-135M head shapes (9 q heads, 3 kv heads, head_dim 64), block 16:
// decode (one query per sequence) against a context, and a whole-prompt prefill.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "backend/cpu/paged_attention.h"

namespace pagoda::cpu::bench {
namespace {

constexpr std::int64_t kHeads = 9;
constexpr std::int64_t kKvHeads = 3;
constexpr std::int64_t kHeadDim = 64;
constexpr std::int64_t kBlockSize = 16;

// $PAGODA_BENCH_THREADS threads (default: one per hardware thread).
ThreadPool& pool() {
  static ThreadPool instance(
      std::getenv("PAGODA_BENCH_THREADS") ? std::atoi(std::getenv("PAGODA_BENCH_THREADS")) : 0);
  return instance;
}

// A KV pool of n elements starting on a cache line, as CpuModelExecutor allocates it.
template <typename T>
struct KvPool {
  KvPool(std::size_t n, T fill) : storage(n + 64 / sizeof(T), fill) {}
  T* data() {
    return reinterpret_cast<T*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) &
                                ~std::uintptr_t{63});
  }
  std::vector<T> storage;
};

// num_seqs sequences of context tokens each, q_len new queries each; reference=1 runs the
// double-precision oracle instead.
void run(benchmark::State& state, std::int64_t num_seqs, std::int64_t context, std::int64_t q_len,
         bool reference) {
  const std::int64_t blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  const std::int64_t num_blocks = num_seqs * blocks_per_seq;
  const std::size_t pool_floats =
      static_cast<std::size_t>(num_blocks * kBlockSize * kKvHeads * kHeadDim);
  KvPool<float> k(pool_floats, 0.01f), v(pool_floats, 0.02f);
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

// Decode against 30 layers' caches in turn, as a model step reads them (K/V from DRAM, not L3);
// time per layer. Args: num_seqs, context, fp16 cache.
void BM_AttentionDecodeLayers(benchmark::State& state) {
  constexpr std::int64_t kLayers = 30;
  const std::int64_t num_seqs = state.range(0);
  const std::int64_t context = state.range(1);
  const KvDtype dtype = state.range(2) != 0 ? KvDtype::kF16 : KvDtype::kF32;
  const std::int64_t blocks_per_seq = (context + kBlockSize - 1) / kBlockSize;
  const std::int64_t num_blocks = num_seqs * blocks_per_seq;
  const auto elements = static_cast<std::size_t>(num_blocks * kBlockSize * kKvHeads * kHeadDim);
  std::vector<KvPool<float>> f32;
  std::vector<KvPool<std::uint16_t>> f16;
  std::vector<KvCacheView> caches;
  for (std::int64_t l = 0; l < kLayers; ++l) {
    KvCacheView cache{.num_blocks = num_blocks,
                      .block_size = kBlockSize,
                      .num_kv_heads = kKvHeads,
                      .head_dim = kHeadDim,
                      .dtype = dtype};
    if (dtype == KvDtype::kF16) {
      f16.emplace_back(elements, std::uint16_t{0x2000});  // 2^-7
      f16.emplace_back(elements, std::uint16_t{0x2400});
      cache.k_f16 = f16[2 * l].data();
      cache.v_f16 = f16[2 * l + 1].data();
    } else {
      f32.emplace_back(elements, 0.01f);
      f32.emplace_back(elements, 0.02f);
      cache.k = f32[2 * l].data();
      cache.v = f32[2 * l + 1].data();
    }
    caches.push_back(cache);
  }
  // Blocks interleaved across sequences, as a pool shared by running requests hands them out.
  std::vector<std::int32_t> tables;
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    for (std::int64_t b = 0; b < blocks_per_seq; ++b) {
      tables.push_back(static_cast<std::int32_t>(b * num_seqs + s));
    }
  }
  std::vector<std::int32_t> starts(static_cast<std::size_t>(num_seqs + 1));
  std::iota(starts.begin(), starts.end(), 0);
  std::vector<std::int32_t> lens(static_cast<std::size_t>(num_seqs),
                                 static_cast<std::int32_t>(context));
  const AttentionBatch batch{starts.data(), lens.data(), tables.data(), num_seqs, blocks_per_seq};
  std::vector<float> q(static_cast<std::size_t>(num_seqs * kHeads * kHeadDim), 0.1f);
  std::vector<float> out(q.size());
  std::size_t layer = 0;
  for (auto _ : state) {
    paged_attention(pool(), q.data(), kHeads, caches[layer], batch, out.data());
    layer = (layer + 1) % caches.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * num_seqs * context *
                          kKvHeads * kHeadDim * 2 * kv_element_bytes(dtype));
}
BENCHMARK(BM_AttentionDecodeLayers)
    ->ArgNames({"seqs", "context", "f16"})
    ->ArgsProduct({{16}, {160}, {0, 1}})
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

// One layer's attention over a whole prompt, as prefill runs it: the prompt's last chunk of
// `chunk` tokens (the step's token budget) against the whole context. The CPU column is the
// process's CPU time (all threads), which a machine shared with other work disturbs less than the
// wall time; GFLOP/s counts causal attention's FLOPs (4 * head_dim per visible (query head, key)
// pair: q.k and p.v) per wall-clock second. Args: context, chunk.
void BM_AttentionPrefillChunk(benchmark::State& state) {
  const std::int64_t context = state.range(0);
  const std::int64_t chunk = std::min(context, state.range(1));
  run(state, 1, context, chunk, false);
  const std::int64_t first = context - chunk;
  // Visible pairs per head: sum over queries of (position + 1).
  const double pairs = static_cast<double>(chunk) * static_cast<double>(first + 1) +
                       static_cast<double>(chunk) * static_cast<double>(chunk - 1) / 2.0;
  state.counters["GFLOP/s"] = benchmark::Counter(pairs * kHeads * 4.0 * kHeadDim,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionPrefillChunk)
    ->ArgNames({"context", "chunk"})
    ->Args({256, 2048})
    ->Args({1024, 2048})
    ->Args({4096, 2048})
    ->Args({2048, 16})
    ->Args({2048, 4})
    ->MeasureProcessCPUTime()
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda::cpu::bench
