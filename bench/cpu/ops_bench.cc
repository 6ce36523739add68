// Memory bandwidth references, thread-pool dispatch cost, and the small ops of a Llama block at
// SmolLM2-135M sizes (hidden 576, intermediate 1536, 9 q heads / 3 kv heads, head_dim 64).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu::bench {
namespace {

ThreadPool& pool() {
  static ThreadPool instance;
  return instance;
}

constexpr std::size_t kBandwidthBytes = 256u << 20;

// Single-threaded memcpy of a DRAM-sized buffer; bytes processed = bytes copied (read once,
// written once).
void BM_Memcpy(benchmark::State& state) {
  std::vector<char> src(kBandwidthBytes, 1), dst(kBandwidthBytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBandwidthBytes));
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

// memcpy split over the pool: the closest peer of a decode matmul, which streams weights on
// every core.
void BM_MemcpyPool(benchmark::State& state) {
  std::vector<char> src(kBandwidthBytes, 1), dst(kBandwidthBytes, 0);
  for (auto _ : state) {
    pool().parallel_for(static_cast<std::int64_t>(kBandwidthBytes >> 16),
                        [&](std::int64_t begin, std::int64_t end) {
                          std::memcpy(dst.data() + (begin << 16), src.data() + (begin << 16),
                                      static_cast<std::size_t>((end - begin) << 16));
                        });
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBandwidthBytes));
}
BENCHMARK(BM_MemcpyPool)->UseRealTime()->Unit(benchmark::kMillisecond);

// One parallel_for with trivial work per range: the dispatch cost a decode step pays ~10 times
// per layer. Arg 0 runs on a pool of one thread (no dispatch at all) for comparison.
void BM_ParallelForOverhead(benchmark::State& state) {
  ThreadPool single(1);
  ThreadPool& p = state.range(0) == 0 ? single : pool();
  std::vector<std::int64_t> sink(64, 0);
  for (auto _ : state) {
    p.parallel_for(p.num_threads(), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) sink[static_cast<std::size_t>(i * 8)]++;
    });
  }
  benchmark::DoNotOptimize(sink.data());
  state.SetLabel(std::to_string(p.num_threads()) + " threads");
}
BENCHMARK(BM_ParallelForOverhead)->Arg(0)->Arg(1)->UseRealTime();

using RmsNormFn = void (*)(const float*, const float*, float, std::int64_t, std::int64_t, float*);

// The optimized kernel and its reference on the same shapes, so one run gives their ratio.
template <RmsNormFn kRmsNorm>
void BM_RmsNormWith(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);
  const std::int64_t hidden = state.range(1);
  std::vector<float> x(static_cast<std::size_t>(tokens * hidden), 0.3f);
  std::vector<float> w(static_cast<std::size_t>(hidden), 1.1f);
  std::vector<float> out(x.size());
  for (auto _ : state) {
    kRmsNorm(x.data(), w.data(), 1e-5f, tokens, hidden, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * x.size() * 8));
}
BENCHMARK(BM_RmsNormWith<rms_norm>)->Name("BM_RmsNorm")->ArgsProduct({{1, 512}, {576, 4096}});
BENCHMARK(BM_RmsNormWith<rms_norm_reference>)
    ->Name("BM_RmsNormReference")
    ->ArgsProduct({{1, 512}, {576, 4096}});

// SmolLM2: 9 q heads, 3 kv heads, head_dim 64, theta 100000.
template <bool kReference>
void BM_Rope(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);
  const std::vector<float> inv_freq = rope_inv_freq(64, 100000.0, {});
  std::vector<float> q(static_cast<std::size_t>(tokens * 9 * 64), 0.1f);
  std::vector<float> k(static_cast<std::size_t>(tokens * 3 * 64), 0.1f);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(tokens));
  for (std::int64_t t = 0; t < tokens; ++t)
    positions[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(t + 100);
  for (auto _ : state) {
    if constexpr (kReference) {
      apply_rope_reference(inv_freq.data(), RopeStyle::kRotateHalf, positions.data(), tokens,
                           q.data(), 9, k.data(), 3, 64);
    } else {
      apply_rope(inv_freq.data(), RopeStyle::kRotateHalf, positions.data(), tokens, q.data(), 9,
                 k.data(), 3, 64);
    }
    benchmark::DoNotOptimize(q.data());
  }
}
BENCHMARK(BM_Rope<false>)->Arg(1)->Arg(512);
BENCHMARK(BM_Rope<true>)->Arg(1)->Arg(512);

void BM_SiluMul(benchmark::State& state) {
  const std::int64_t n = state.range(0) * 1536;
  std::vector<float> gate(static_cast<std::size_t>(n), 0.7f), up(gate.size(), 1.3f),
      out(gate.size());
  for (auto _ : state) {
    silu_mul(gate.data(), up.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_SiluMul)->Arg(1)->Arg(512);

void BM_SoftmaxVocab(benchmark::State& state) {
  std::vector<float> logits(49152);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 97) * 0.1f;
  std::vector<float> work(logits.size());
  for (auto _ : state) {
    work = logits;
    softmax(work.data(), 1, static_cast<std::int64_t>(work.size()));
    benchmark::DoNotOptimize(work.data());
  }
}
BENCHMARK(BM_SoftmaxVocab);

}  // namespace
}  // namespace pagoda::cpu::bench
