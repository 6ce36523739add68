// `pagoda bench offline`: N random-token prompts submitted at once through the EngineClient,
// then the same lengths as a single stream, in one invocation so both see the same machine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "cli/commands.h"
#include "cli/model_assets.h"
#include "engine/cpu_engine.h"

namespace pagoda::cli {

namespace {

struct BenchResult {
  double seconds = 0.0;
  std::int64_t num_requests = 0;
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  double mean_ttft = 0.0;
  // Decode phase: from the first token of any request to the last finish, tokens after each
  // request's first (the first comes from the prefill step).
  double decode_seconds = 0.0;
  std::int64_t decode_tokens = 0;
  double decode_rate() const { return decode_seconds > 0 ? decode_tokens / decode_seconds : 0.0; }
  // Steady state: the window in which every request had its first token and none had finished,
  // so each step decodes the whole batch and carries no prefill; tokens produced inside it.
  double steady_seconds = 0.0;
  std::int64_t steady_tokens = 0;
  double steady_rate() const { return steady_seconds > 0 ? steady_tokens / steady_seconds : 0.0; }
  // Every gap between consecutive tokens of a request, all requests (ITL).
  std::vector<double> inter_token_latencies;
  double itl_percentile(double p) const {
    if (inter_token_latencies.empty()) return 0.0;
    std::vector<double> sorted = inter_token_latencies;
    std::sort(sorted.begin(), sorted.end());
    const auto at = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(at, sorted.size() - 1)];
  }
};

// Times at which a request's tokens arrived: its first token, then one step per latency.
std::vector<double> token_times(const engine::RequestTimings& timings) {
  std::vector<double> times;
  if (!timings.first_token_time) return times;
  double t = *timings.first_token_time;
  times.push_back(t);
  for (double gap : timings.inter_token_latencies) times.push_back(t += gap);
  return times;
}

StatusOr<BenchResult> run_batch(engine::EngineClient& client, std::int64_t num_prompts,
                                std::int64_t input_len, std::int64_t output_len,
                                std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  // Ids from the middle of the vocabulary: ordinary tokens, no specials.
  std::uniform_int_distribution<std::int32_t> token(1000, 20000);
  std::vector<std::shared_ptr<engine::OutputStream>> streams;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < num_prompts; ++i) {
    engine::EngineRequest r;
    for (std::int64_t t = 0; t < input_len; ++t) r.prompt_token_ids.push_back(token(rng));
    r.max_tokens = output_len;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0;
    r.stream = false;
    PAGODA_ASSIGN_OR_RETURN(auto stream, client.submit(std::move(r)));
    streams.push_back(std::move(stream));
  }
  BenchResult result;
  double first_token = 1e300;
  double last_finish = 0.0;
  double last_first_token = 0.0;
  double first_finish = 1e300;
  std::vector<std::vector<double>> arrivals;
  for (auto& stream : streams) {
    PAGODA_ASSIGN_OR_RETURN(engine::StreamOutput out, stream->next());
    if (!out.error.ok()) return out.error;
    arrivals.push_back(token_times(out.output.timings));
    const auto& itl = out.output.timings.inter_token_latencies;
    result.inter_token_latencies.insert(result.inter_token_latencies.end(), itl.begin(), itl.end());
    last_first_token =
        std::max(last_first_token, out.output.timings.first_token_time.value_or(0.0));
    first_finish = std::min(first_finish, out.output.timings.finished_time.value_or(0.0));
    result.prompt_tokens += out.output.usage.num_prompt_tokens;
    result.output_tokens += out.output.usage.num_completion_tokens;
    result.mean_ttft += out.output.timings.time_to_first_token().value_or(0.0);
    result.decode_tokens += out.output.usage.num_completion_tokens - 1;
    first_token = std::min(first_token, out.output.timings.first_token_time.value_or(0.0));
    last_finish = std::max(last_finish, out.output.timings.finished_time.value_or(0.0));
  }
  result.decode_seconds = last_finish - first_token;
  if (first_finish > last_first_token) {
    result.steady_seconds = first_finish - last_first_token;
    for (const auto& times : arrivals) {
      result.steady_tokens += std::count_if(times.begin(), times.end(), [&](double t) {
        return t > last_first_token && t <= first_finish;
      });
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.num_requests = num_prompts;
  result.mean_ttft /= static_cast<double>(num_prompts);
  return result;
}

void print(const char* label, const BenchResult& r) {
  std::printf(
      "%-13s %3lld req in %7.2f s | %6.3f req/s | output %7.1f tok/s | total %7.1f tok/s | "
      "mean TTFT %7.1f ms | decode %7.1f tok/s | steady decode %7.1f tok/s | ITL p50 %.2f ms "
      "p99 %.2f ms\n",
      label, static_cast<long long>(r.num_requests), r.seconds, r.num_requests / r.seconds,
      r.output_tokens / r.seconds, (r.prompt_tokens + r.output_tokens) / r.seconds,
      r.mean_ttft * 1e3, r.decode_rate(), r.steady_rate(), r.itl_percentile(0.5) * 1e3,
      r.itl_percentile(0.99) * 1e3);
}

}  // namespace

CLI::App* BenchCommand::add_to(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* sub = bench->add_subcommand("offline", "Throughput of N prompts submitted at once");
  sub->add_option("model", model, "A .gguf file or a Hugging Face model folder (default model)");
  sub->add_option("--num-prompts", num_prompts, "Prompts submitted at once")->capture_default_str();
  sub->add_option("--input-len", input_len, "Prompt tokens")->capture_default_str();
  sub->add_option("--output-len", output_len, "Generated tokens (EOS ignored)")
      ->capture_default_str();
  sub->add_option("--max-num-seqs", max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  sub->add_option("--max-num-batched-tokens", max_num_batched_tokens, "Token budget per step")
      ->capture_default_str();
  sub->add_option("--kv-cache-memory", kv_cache_memory, "KV cache bytes (default: see docs)");
  sub->add_option("--seed", seed, "Seed of the random prompts")->capture_default_str();
  sub->add_option("--threads", threads, "Threads (default: all cores)");
  sub->add_flag("--no-single-stream", no_single_stream, "Skip the single-stream baseline");
  trace.add_to(*sub);
  return sub;
}

int BenchCommand::run(const char* argv0) const {
  if (num_prompts < 1 || input_len < 1 || output_len < 1) {
    return report_error(invalid_argument("--num-prompts, --input-len, --output-len must be >= 1"));
  }
  auto path = resolve_model_path(model, argv0);
  if (!path.ok()) return report_error(path.status());
  engine::CpuEngineOptions options;
  options.model_path = *path;
  options.num_threads = threads;
  options.engine.scheduler.max_num_seqs = max_num_seqs;
  options.engine.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.engine.scheduler.max_model_len = input_len + output_len;
  options.engine.kv_cache_memory_bytes = kv_cache_memory;
  if (Status s = trace.apply(options.engine); !s.ok()) return report_error(s);
  auto client = engine::open_cpu_engine(options);
  if (!client.ok()) return report_error(client.status());
  std::printf("model %s, %lld prompts x (%lld in + %lld out), max_num_seqs %lld, %lld KV blocks\n",
              path->c_str(), static_cast<long long>(num_prompts), static_cast<long long>(input_len),
              static_cast<long long>(output_len), static_cast<long long>(max_num_seqs),
              static_cast<long long>((*client)->stats().num_kv_blocks));
  // A short warm-up so page faults on the weights do not count against the first run.
  if (auto warm = run_batch(**client, 1, 8, 2, seed + 1); !warm.ok()) {
    return report_error(warm.status());
  }
  auto batch = run_batch(**client, num_prompts, input_len, output_len, seed);
  if (!batch.ok()) return report_error(batch.status());
  print("concurrent", *batch);
  if (options.engine.trace_sink) {
    const engine::EngineStats stats = (*client)->stats();
    std::printf("trace: %lld events written, %lld dropped, %lld bytes, engine time %.1f ms\n",
                static_cast<long long>(stats.trace_events_written),
                static_cast<long long>(stats.trace_events_dropped),
                static_cast<long long>(stats.trace_bytes_written), stats.trace_seconds * 1e3);
  }
  if (no_single_stream) return 0;
  auto single = run_batch(**client, 1, input_len, output_len, seed + 2);
  if (!single.ok()) return report_error(single.status());
  print("single-stream", *single);
  std::printf("vs single stream: output tok/s %.2fx, decode tok/s %.2fx, steady decode %.2fx\n",
              (batch->output_tokens / batch->seconds) / (single->output_tokens / single->seconds),
              batch->decode_rate() / single->decode_rate(),
              batch->steady_rate() / single->steady_rate());
  return 0;
}

}  // namespace pagoda::cli
