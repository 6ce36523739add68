// Per-token cost of turning engine outputs into OpenAI bytes (ResponseEncoder): SSE chunks for
// streaming chat and completions, and the gathered JSON body for non-streaming requests. This runs
// on the HTTP io threads once per token of every stream, next to a decode step of ~ms.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "api/response_encoder.h"
#include "bench_model.h"

namespace pagoda::api {
namespace {

constexpr std::int64_t kTokensPerResponse = 64;

// The deltas of a 64-token answer, one token each, as the engine streams them.
std::vector<engine::StreamOutput> answer_deltas(const Tokenizer& tokenizer) {
  const std::vector<std::int32_t> ids =
      tokenizer.encode(bench::corpus_text().substr(0, 4096), {.add_special_tokens = false});
  std::vector<engine::StreamOutput> deltas;
  auto stream = tokenizer.start_decode();
  for (std::int64_t i = 0; i < kTokensPerResponse; ++i) {
    engine::StreamOutput out;
    out.output.token_ids = {ids[static_cast<std::size_t>(i)]};
    out.output.text = stream->push(ids[static_cast<std::size_t>(i)]);
    deltas.push_back(std::move(out));
  }
  engine::StreamOutput& last = deltas.back();
  last.output.finished = true;
  last.output.status = engine::RequestStatus::kFinishedLength;
  last.output.usage = {.num_prompt_tokens = 128,
                       .num_completion_tokens = kTokensPerResponse,
                       .num_cached_prompt_tokens = 0};
  return deltas;
}

ResponseOptions options_for(ApiEndpoint endpoint, bool stream) {
  ResponseOptions o;
  o.endpoint = endpoint;
  o.id = endpoint == ApiEndpoint::kChatCompletions ? "chatcmpl-0123456789abcdef0123456789abcdef"
                                                   : "cmpl-0123456789abcdef0123456789abcdef";
  o.model = "SmolLM2-135M-Instruct";
  o.created = 1764000000;
  o.stream = stream;
  o.include_usage = stream;
  o.num_prompt_tokens = {128};
  return o;
}

// One whole 64-token response per iteration: 64 add() calls, then finish_stream() (streaming)
// or finish_body() (not). Items are tokens, so items/s inverted is the cost per token.
// Arg 0: endpoint (0 chat, 1 completions); Arg 1: stream (1) or one JSON body (0).
void BM_EncodeResponse(benchmark::State& state) {
  const auto tokenizer = bench::default_tokenizer();
  if (!tokenizer) return state.SkipWithError("no default model: run scripts/setup.sh");
  const ApiEndpoint endpoint =
      state.range(0) == 0 ? ApiEndpoint::kChatCompletions : ApiEndpoint::kCompletions;
  const bool stream = state.range(1) != 0;
  const std::vector<engine::StreamOutput> deltas = answer_deltas(*tokenizer);
  std::int64_t bytes = 0;
  for (auto _ : state) {
    ResponseEncoder encoder(options_for(endpoint, stream), tokenizer);
    std::size_t sent = 0;
    for (const engine::StreamOutput& delta : deltas) sent += encoder.add(0, delta).size();
    if (stream) {
      sent += encoder.finish_stream().size();
    } else {
      sent += encoder.finish_body().body.size();
    }
    bytes = static_cast<std::int64_t>(sent);
    benchmark::DoNotOptimize(sent);
  }
  state.SetItemsProcessed(state.iterations() * kTokensPerResponse);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["ns_per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations() * kTokensPerResponse) * 1e-9,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_EncodeResponse)
    ->ArgNames({"completions", "stream"})
    ->Args({0, 1})
    ->Args({1, 1})
    ->Args({0, 0})
    ->Args({1, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pagoda::api
