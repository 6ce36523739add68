// Cost of parsing a request body with one large object (a logit_bias over the whole vocabulary,
// or an unknown field a hostile client fills with keys): parse_request_body against
// nlohmann::ordered_json::parse, which it replaced and which looks every key up in its object
// (quadratic), and nlohmann::json::parse (std::map, unordered keys) for scale. Parsing runs on
// an HTTP io thread, so a slow parse holds up every connection on that thread (/health too).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>
#include <string>

#include "api/request_body.h"

namespace pagoda::api {
namespace {

// {"model": "m", "logit_bias": {"0": 1, "1": 1, ...}} with `num_keys` keys.
std::string body_with_keys(std::int64_t num_keys) {
  std::string text = R"({"model": "m", "logit_bias": {)";
  for (std::int64_t i = 0; i < num_keys; ++i) {
    if (i > 0) text += ',';
    text += "\"" + std::to_string(i) + "\":1";
  }
  return text + "}}";
}

void set_counters(benchmark::State& state, const std::string& body) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(body.size()));
  state.counters["keys"] = static_cast<double>(state.range(0));
}

void BM_ParseRequestBody(benchmark::State& state) {
  const std::string body = body_with_keys(state.range(0));
  for (auto _ : state) {
    ApiErrorOr<Json> parsed = parse_request_body(body);
    if (!parsed.ok()) state.SkipWithError(parsed.error().message.c_str());
    benchmark::DoNotOptimize(parsed);
  }
  set_counters(state, body);
}

void BM_OrderedJsonParse(benchmark::State& state) {
  const std::string body = body_with_keys(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::ordered_json::parse(body));
  set_counters(state, body);
}

void BM_MapJsonParse(benchmark::State& state) {
  const std::string body = body_with_keys(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(body));
  set_counters(state, body);
}

BENCHMARK(BM_ParseRequestBody)
    ->Arg(1'000)
    ->Arg(8'000)
    ->Arg(49'152)
    ->Arg(262'144)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OrderedJsonParse)->Arg(1'000)->Arg(8'000)->Arg(49'152)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MapJsonParse)
    ->Arg(1'000)
    ->Arg(8'000)
    ->Arg(49'152)
    ->Arg(262'144)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda::api
