// Tokenizer throughput on the default model's tokenizer (SmolLM2: byte-level BPE with the GPT-2
// pre-tokenizer regex) over the repository's docs: encode in MB/s of input text, decode and
// streaming decode (the per-token path of every generated token) in tokens/s.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_model.h"

namespace pagoda::bench {
namespace {

// Encodes the first Arg bytes of the corpus (cut back to a line end) in one call.
void BM_TokenizerEncode(benchmark::State& state) {
  const auto tokenizer = default_tokenizer();
  if (!tokenizer) return state.SkipWithError(("no model at " + default_model_path()).c_str());
  std::string text = corpus_text().substr(0, static_cast<std::size_t>(state.range(0)));
  text.resize(std::max<std::size_t>(text.rfind('\n'), 1));
  std::int64_t num_tokens = 0;
  for (auto _ : state) {
    const std::vector<std::int32_t> ids = tokenizer->encode(text);
    num_tokens = static_cast<std::int64_t>(ids.size());
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * num_tokens);
  state.counters["tokens"] = static_cast<double>(num_tokens);
}
BENCHMARK(BM_TokenizerEncode)->Arg(512)->Arg(8 << 10)->Arg(64 << 10)->Unit(benchmark::kMicrosecond);

std::vector<std::int32_t> corpus_ids(const Tokenizer& tokenizer, std::size_t max_tokens) {
  std::vector<std::int32_t> ids = tokenizer.encode(corpus_text(), {.add_special_tokens = false});
  ids.resize(std::min(ids.size(), max_tokens));
  return ids;
}

// decode() of 4096 ids at once.
void BM_TokenizerDecode(benchmark::State& state) {
  const auto tokenizer = default_tokenizer();
  if (!tokenizer) return state.SkipWithError(("no model at " + default_model_path()).c_str());
  const std::vector<std::int32_t> ids = corpus_ids(*tokenizer, 4096);
  std::int64_t bytes = 0;
  for (auto _ : state) {
    const std::string text = tokenizer->decode(ids);
    bytes = static_cast<std::int64_t>(text.size());
    benchmark::DoNotOptimize(text.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ids.size()));
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_TokenizerDecode)->Unit(benchmark::kMicrosecond);

// DecodeStream::push one id at a time (incremental detokenization, as the engine does per
// generated token), 4096 ids per iteration.
void BM_TokenizerDecodeStream(benchmark::State& state) {
  const auto tokenizer = default_tokenizer();
  if (!tokenizer) return state.SkipWithError(("no model at " + default_model_path()).c_str());
  const std::vector<std::int32_t> ids = corpus_ids(*tokenizer, 4096);
  for (auto _ : state) {
    auto stream = tokenizer->start_decode();
    std::size_t bytes = 0;
    for (std::int32_t id : ids) bytes += stream->push(id).size();
    bytes += stream->finish().size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ids.size()));
}
BENCHMARK(BM_TokenizerDecodeStream)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda::bench
