// Per-token sampling costs on the engine thread, at the default model's vocabulary (49,152): they
// are paid once per generated token, serially, so they add straight to every decode step.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sampling/logprobs.h"

namespace pagoda::sampling {
namespace {

constexpr std::int64_t kVocab = 49152;

std::vector<float> random_logits(std::int64_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> logits(static_cast<std::size_t>(n));
  for (float& l : logits) l = dist(rng);
  return logits;
}

// log_softmax of the chosen token, its rank and the top-N alternatives. Arg: N (0 = the sampled
// token only, as `logprobs: 0`; 5 = a traced request's default top-5).
void BM_ComputeLogprobs(benchmark::State& state) {
  const std::vector<float> logits = random_logits(kVocab);
  SampledLogprobs out;
  for (auto _ : state) {
    compute_logprobs(logits, 123, state.range(0), out);
    benchmark::DoNotOptimize(out.logprob);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ComputeLogprobs)->Arg(0)->Arg(5)->Arg(20);

}  // namespace
}  // namespace pagoda::sampling
