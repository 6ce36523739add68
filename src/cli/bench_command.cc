// `pagoda bench offline`: N random-token prompts submitted at once through the EngineClient,
// then the same lengths as a single stream, in one invocation so both see the same machine;
// with --rounds R the two alternate R times and each side's runs are pooled, so a noisy
// neighbour that slows one run weighs on both sides of the ratio.
// With --speculative-config the same workload also runs on a second engine without speculation,
// interleaved, so the speed-up is a ratio from one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/bench_prompts.h"
#include "cli/commands.h"
#include "cli/model_assets.h"
#include "engine/model_engine.h"

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

// Runs of one side pooled: tokens and seconds summed, so the rates weigh each run by its length.
BenchResult pool_runs(const std::vector<BenchResult>& runs) {
  BenchResult all;
  double ttft_sum = 0.0;
  for (const BenchResult& r : runs) {
    all.seconds += r.seconds;
    all.num_requests += r.num_requests;
    all.prompt_tokens += r.prompt_tokens;
    all.output_tokens += r.output_tokens;
    ttft_sum += r.mean_ttft * static_cast<double>(r.num_requests);
    all.decode_seconds += r.decode_seconds;
    all.decode_tokens += r.decode_tokens;
    all.steady_seconds += r.steady_seconds;
    all.steady_tokens += r.steady_tokens;
    all.inter_token_latencies.insert(all.inter_token_latencies.end(),
                                     r.inter_token_latencies.begin(),
                                     r.inter_token_latencies.end());
  }
  if (all.num_requests > 0) all.mean_ttft = ttft_sum / static_cast<double>(all.num_requests);
  return all;
}

// Times at which a request's tokens arrived: its first token, then one step per latency.
std::vector<double> token_times(const engine::RequestTimings& timings) {
  std::vector<double> times;
  if (!timings.first_token_time) return times;
  double t = *timings.first_token_time;
  times.push_back(t);
  for (double gap : timings.inter_token_latencies) times.push_back(t += gap);
  return times;
}

// Greedy, all at once; ignore_eos keeps random prompts at output_len tokens, a grounded answer
// ends where the model ends it.
StatusOr<BenchResult> run_batch(engine::EngineClient& client,
                                const std::vector<std::vector<std::int32_t>>& prompts,
                                std::int64_t output_len, bool ignore_eos) {
  const auto num_prompts = static_cast<std::int64_t>(prompts.size());
  std::vector<std::shared_ptr<engine::OutputStream>> streams;
  const auto start = std::chrono::steady_clock::now();
  for (const std::vector<std::int32_t>& prompt : prompts) {
    engine::EngineRequest r;
    r.prompt_token_ids = prompt;
    r.max_tokens = output_len;
    r.ignore_eos = ignore_eos;
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

void print_ratio(const char* label, const BenchResult& b, const BenchResult& s) {
  std::printf("%s: output tok/s %.2fx, decode tok/s %.2fx, steady decode %.2fx\n", label,
              (b.output_tokens / b.seconds) / (s.output_tokens / s.seconds),
              b.decode_rate() / s.decode_rate(), b.steady_rate() / s.steady_rate());
}

using Prompts = std::vector<std::vector<std::int32_t>>;

// One round's prompts: the concurrent batch and the single stream.
struct RoundPrompts {
  Prompts batch;
  Prompts single;
};

// --rounds: concurrent, single stream, concurrent, ... each run printed, then each side pooled
// and the ratio of the pools, with the spread of the per-round steady-decode ratios.
Status run_rounds(engine::EngineClient& client, const std::vector<RoundPrompts>& rounds,
                  bool with_single, std::int64_t output_len, bool ignore_eos) {
  std::vector<BenchResult> batch_runs, single_runs;
  std::vector<double> steady_ratios;
  const auto count = static_cast<std::int64_t>(rounds.size());
  for (std::int64_t r = 0; r < count; ++r) {
    const RoundPrompts& round = rounds[static_cast<std::size_t>(r)];
    const std::string of = " " + std::to_string(r + 1) + "/" + std::to_string(count);
    PAGODA_ASSIGN_OR_RETURN(BenchResult b, run_batch(client, round.batch, output_len, ignore_eos));
    print(("concurrent" + of).c_str(), b);
    batch_runs.push_back(std::move(b));
    if (!with_single) continue;
    PAGODA_ASSIGN_OR_RETURN(BenchResult s, run_batch(client, round.single, output_len, ignore_eos));
    print(("single" + of).c_str(), s);
    if (s.steady_rate() > 0)
      steady_ratios.push_back(batch_runs.back().steady_rate() / s.steady_rate());
    single_runs.push_back(std::move(s));
  }
  const BenchResult b = pool_runs(batch_runs);
  print("concurrent", b);
  if (!with_single) return Status::ok_status();
  const BenchResult s = pool_runs(single_runs);
  print("single-stream", s);
  print_ratio(("vs single stream, " + std::to_string(count) + " rounds pooled").c_str(), b, s);
  std::sort(steady_ratios.begin(), steady_ratios.end());
  if (!steady_ratios.empty()) {
    const std::size_t mid = steady_ratios.size() / 2;
    const double median = steady_ratios.size() % 2 == 1
                              ? steady_ratios[mid]
                              : (steady_ratios[mid - 1] + steady_ratios[mid]) / 2.0;
    std::printf("steady decode ratio per round: min %.2fx, median %.2fx, max %.2fx\n",
                steady_ratios.front(), median, steady_ratios.back());
  }
  return Status::ok_status();
}

// Stats once the engine is idle (they are published after each step).
engine::EngineStats settled_stats(const engine::EngineClient& client) {
  engine::EngineStats stats = client.stats();
  for (int i = 0; i < 200 && (stats.num_running > 0 || stats.num_waiting > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stats = client.stats();
  }
  return stats;
}

// Drafts between two snapshots: acceptance rate, and mean accepted length (tokens per
// verification, the bonus token included; vLLM's mean acceptance length).
void print_speculation(const engine::SpecDecodeStats& before,
                       const engine::SpecDecodeStats& after) {
  const std::int64_t drafts = after.num_drafts - before.num_drafts;
  const std::int64_t proposed = after.num_draft_tokens - before.num_draft_tokens;
  const std::int64_t accepted = after.num_accepted_tokens - before.num_accepted_tokens;
  std::printf(
      "speculation: %lld verifications, %lld draft tokens, %lld accepted (rate %.3f), "
      "mean accepted length %.2f; per position",
      static_cast<long long>(drafts), static_cast<long long>(proposed),
      static_cast<long long>(accepted),
      proposed > 0 ? static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0,
      drafts > 0 ? 1.0 + static_cast<double>(accepted) / static_cast<double>(drafts) : 0.0);
  for (std::size_t p = 0; p < after.num_accepted_tokens_per_pos.size(); ++p) {
    const std::int64_t prior =
        p < before.num_accepted_tokens_per_pos.size() ? before.num_accepted_tokens_per_pos[p] : 0;
    std::printf(" %lld", static_cast<long long>(after.num_accepted_tokens_per_pos[p] - prior));
  }
  std::printf("\n");
}

}  // namespace

CLI::App* BenchCommand::add_to(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  CLI::App* sub =
      bench->add_subcommand("offline", "Throughput of N prompts submitted at once (GPU or CPU)");
  sub->add_option("model", model,
                  "A .gguf file or a Hugging Face model folder (default model); with "
                  "--load-format dummy also a config.json file");
  sub->add_option("--num-prompts", num_prompts, "Prompts submitted at once")->capture_default_str();
  sub->add_option("--input-len", input_len, "Prompt tokens")->capture_default_str();
  sub->add_option("--output-len", output_len, "Generated tokens (EOS ignored)")
      ->capture_default_str();
  sub->add_option("--max-num-seqs", max_num_seqs, "Most requests running at once")
      ->capture_default_str();
  sub->add_flag("--async-scheduling", async_scheduling,
                "Plan and launch each step while the previous one runs (overlapped steps)");
  sub->add_option("--step-time-target-ms", step_time_target_ms, cli::kStepTimeTargetHelp);
  sub->add_option("--max-num-batched-tokens", max_num_batched_tokens, "Token budget per step")
      ->capture_default_str();
  sub->add_option("--kv-cache-memory", kv_cache_memory,
                  "KV cache bytes (default on cuda: what --gpu-memory-utilization leaves; on cpu: "
                  "see docs/architecture.md)");
  sub->add_flag("--disable-hybrid-kv-cache-manager", disable_hybrid_kv_cache_manager,
                "One KV block table for every layer (docs/kv_cache_groups.md)");
  sub->add_option("--seed", seed, "Seed of the random prompts")->capture_default_str();
  sub->add_option("--threads", threads, "Threads (default: all cores)");
  sub->add_flag("--no-single-stream", no_single_stream, "Skip the single-stream baseline");
  sub->add_option("--rounds", rounds,
                  "Alternate the concurrent batch and the single stream this many times and pool "
                  "each side's runs (both sides then see the same machine conditions)")
      ->capture_default_str();
  sub->add_option("--workload", workload,
                  "random (random tokens, --input-len each) or grounded (repeat a given passage; "
                  "EOS ends the answer)")
      ->check(CLI::IsMember({"random", "grounded"}))
      ->capture_default_str();
  device.add_to(*sub);
  load.add_to(*sub);
  speculative.add_to(*sub);
  quantization.add_to(*sub);
  trace.add_to(*sub);
  return sub;
}

int BenchCommand::run(const char* argv0) const {
  if (num_prompts < 1 || input_len < 1 || output_len < 1 || rounds < 1) {
    return report_error(
        invalid_argument("--num-prompts, --input-len, --output-len, --rounds must be >= 1"));
  }
  if (rounds > 1 && speculative.enabled()) {
    return report_error(invalid_argument(
        "--rounds goes with a single-stream baseline; with --speculative-config the baseline is "
        "the engine without speculation, already interleaved (use --rounds 1)"));
  }
  auto path = resolve_model_path(model, argv0);
  if (!path.ok()) return report_error(path.status());
  engine::EngineOptions options;
  options.model_path = *path;
  options.executor.num_threads = threads;
  if (Status s = device.apply(quantization, options.executor); !s.ok()) return report_error(s);
  if (Status s = load.apply(options.executor); !s.ok()) return report_error(s);
  engine::StartupReport startup;
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = load.open(*path, options.executor.load_format);
  if (!loaded.ok()) return report_error(loaded.status());
  startup.add("tokenizer",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  options.files = loaded->files;
  options.tokenizer = loaded->tokenizer;
  options.engine.scheduler.max_num_seqs = max_num_seqs;
  options.engine.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.engine.async_scheduling = async_scheduling;
  {
    auto target = cli::step_time_target_seconds(step_time_target_ms, options.executor.device);
    if (!target.ok()) return report_error(target.status());
    options.engine.step_time_target_seconds = *target;
  }
  // Each round draws its own prompts (seed + 1000 per round), so a later round does not hit the
  // prefix cache an earlier one filled; round 1's are those of a single run.
  std::vector<RoundPrompts> round_prompts;
  std::int64_t longest = input_len;
  for (std::int64_t r = 0; r < rounds; ++r) {
    const std::uint64_t s = seed + 1000 * static_cast<std::uint64_t>(r);
    auto batch = workload == "grounded" ? grounded_prompts(*loaded->tokenizer_files,
                                                           *loaded->tokenizer, num_prompts, s)
                                        : random_prompts(num_prompts, input_len, s);
    if (!batch.ok()) return report_error(batch.status());
    auto single = workload == "grounded"
                      ? grounded_prompts(*loaded->tokenizer_files, *loaded->tokenizer, 1, s + 2)
                      : random_prompts(1, input_len, s + 2);
    if (!single.ok()) return report_error(single.status());
    for (const auto& p : *batch) longest = std::max<std::int64_t>(longest, std::ssize(p));
    for (const auto& p : *single) longest = std::max<std::int64_t>(longest, std::ssize(p));
    round_prompts.push_back({std::move(*batch), std::move(*single)});
  }
  const Prompts& prompts = round_prompts[0].batch;
  const Prompts& single_prompt = round_prompts[0].single;
  options.engine.scheduler.max_model_len = longest + output_len;
  options.engine.kv_cache_memory_bytes = kv_cache_memory;
  options.engine.disable_hybrid_kv_cache_manager = disable_hybrid_kv_cache_manager;
  if (Status s = trace.apply(options.engine); !s.ok()) return report_error(s);
  if (Status s = speculative.apply(options.engine); !s.ok()) return report_error(s);
  // With speculation on a GPU two engines share the device: the first takes half of
  // --gpu-memory-utilization, and the baseline's profiling pass, which counts the first as
  // held, gets the other half.
  const double utilization = options.executor.gpu_memory_utilization;
  if (speculative.enabled()) options.executor.gpu_memory_utilization = utilization / 2;
  options.startup = &startup;
  auto client = engine::open_engine(options);
  if (!client.ok()) return report_error(client.status());
  std::fprintf(stderr, "%s\n", startup.summary().c_str());
  if (!startup.weights.empty()) std::fprintf(stderr, "weights: %s\n", startup.weights.c_str());
  if (startup.graphs) std::fprintf(stderr, "%s\n", startup.graphs_summary().c_str());
  // With speculation, the baseline is the same engine without it, run beside it.
  std::unique_ptr<engine::EngineClient> baseline;
  if (speculative.enabled()) {
    engine::EngineOptions plain = options;
    plain.startup = nullptr;
    plain.executor.gpu_memory_utilization = utilization;
    plain.engine.speculative.reset();
    plain.engine.trace_sink = nullptr;
    auto opened = engine::open_engine(std::move(plain));
    if (!opened.ok()) return report_error(opened.status());
    baseline = std::move(*opened);
  }
  const std::string device_label = device.label(options.executor.device);
  std::printf(
      "model %s on %s, %s workload, %lld prompts x (%lld in + %lld out), max_num_seqs %lld, "
      "%lld KV blocks%s\n",
      path->c_str(), device_label.c_str(), workload.c_str(), static_cast<long long>(num_prompts),
      static_cast<long long>(longest), static_cast<long long>(output_len),
      static_cast<long long>(max_num_seqs),
      static_cast<long long>((*client)->stats().num_kv_blocks),
      speculative.enabled() ? (", speculative " + speculative.json).c_str() : "");
  const bool ignore_eos = workload == "random";
  // A short warm-up so page faults on the weights do not count against the first run; it stays
  // inside max_model_len (longest + output_len) however short the benchmark's requests are.
  const std::int64_t warm_prompt = std::min<std::int64_t>(8, longest);
  const std::int64_t warm_output = std::min<std::int64_t>(2, output_len);
  for (engine::EngineClient* c : {client->get(), baseline.get()}) {
    if (c == nullptr) continue;
    if (auto warm = run_batch(*c, random_prompts(1, warm_prompt, seed + 1), warm_output, true);
        !warm.ok()) {
      return report_error(warm.status());
    }
  }
  // One workload on the engine under test; with a baseline, in the order off, spec, spec, off
  // so that warm-up and drift favour neither side, and the ratio pools both runs of each.
  const auto compare =
      [&](const char* label,
          const std::vector<std::vector<std::int32_t>>& work) -> StatusOr<BenchResult> {
    if (!baseline) {
      PAGODA_ASSIGN_OR_RETURN(BenchResult on, run_batch(**client, work, output_len, ignore_eos));
      print(label, on);
      return on;
    }
    BenchResult runs[4];
    const engine::SpecDecodeStats before = settled_stats(**client).spec_decode;
    for (int i = 0; i < 4; ++i) {
      const bool spec = i == 1 || i == 2;
      PAGODA_ASSIGN_OR_RETURN(runs[i],
                              run_batch(spec ? **client : *baseline, work, output_len, ignore_eos));
      print((std::string(label) + (spec ? " spec" : " off")).c_str(), runs[i]);
    }
    print_speculation(before, settled_stats(**client).spec_decode);
    const auto pooled = [](const BenchResult& a, const BenchResult& b) {
      return std::pair{
          static_cast<double>(a.output_tokens + b.output_tokens) / (a.seconds + b.seconds),
          static_cast<double>(a.decode_tokens + b.decode_tokens) /
              (a.decode_seconds + b.decode_seconds)};
    };
    const auto [on_output, on_decode] = pooled(runs[1], runs[2]);
    const auto [off_output, off_decode] = pooled(runs[0], runs[3]);
    std::printf("%s spec vs off: output tok/s %.2fx, decode tok/s %.2fx\n", label,
                on_output / off_output, on_decode / off_decode);
    return runs[1];
  };
  if (rounds > 1) {
    Status s = run_rounds(**client, round_prompts, !no_single_stream, output_len, ignore_eos);
    return s.ok() ? 0 : report_error(s);
  }
  const DeviceTimeStats device_before = settled_stats(**client).device_time;
  auto batch = compare("concurrent", prompts);
  if (!batch.ok()) return report_error(batch.status());
  {
    // The GPU's own view of the same run (CUDA events; nothing on the CPU).
    const DeviceTimeStats after = settled_stats(**client).device_time;
    const auto steps = after.steps - device_before.steps;
    const double busy = after.busy_seconds - device_before.busy_seconds;
    const double idle = after.idle_seconds - device_before.idle_seconds;
    if (steps > 0) {
      std::printf("GPU per step: busy %.3f ms, idle %.3f ms (%.2f%% idle) over %lld steps\n",
                  busy / steps * 1e3, idle / steps * 1e3,
                  busy + idle > 0 ? 100.0 * idle / (busy + idle) : 0.0,
                  static_cast<long long>(steps));
    }
  }
  {
    // Host time between steps, what the device waits through (engine_core.h, HostGapStats).
    const engine::HostGapStats gap = settled_stats(**client).host_gap;
    std::printf(
        "host gap per step: mean %.1f us, p50 %.1f us over %lld steps "
        "(async scheduling %s)\n",
        gap.mean_seconds() * 1e6, gap.p50_seconds * 1e6, static_cast<long long>(gap.steps),
        async_scheduling ? "on" : "off");
  }
  if (options.engine.trace_sink) {
    const engine::EngineStats stats = (*client)->stats();
    std::printf("trace: %lld events written, %lld dropped, %lld bytes, engine time %.1f ms\n",
                static_cast<long long>(stats.trace_events_written),
                static_cast<long long>(stats.trace_events_dropped),
                static_cast<long long>(stats.trace_bytes_written), stats.trace_seconds * 1e3);
  }
  if (no_single_stream) return 0;
  auto single = compare("single-stream", single_prompt);
  if (!single.ok()) return report_error(single.status());
  print_ratio("vs single stream", *batch, *single);
  return 0;
}

}  // namespace pagoda::cli
