#include "api/serving_metrics.h"

#include <algorithm>

#include "api/prometheus_writer.h"

namespace pagoda::api {

namespace {

// vLLM's buckets, so dashboards and alerts carry over.
std::vector<double> ttft_buckets() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25,  0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}
std::vector<double> token_latency_buckets() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}
std::vector<double> request_latency_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}
// 1, 2, 5, 10, 20, 50, ... up to `limit`.
std::vector<double> token_count_buckets(std::int64_t limit) {
  std::vector<double> buckets;
  for (std::int64_t scale = 1;; scale *= 10) {
    for (const std::int64_t m : {1, 2, 5}) {
      if (m * scale > limit) return buckets;
      buckets.push_back(static_cast<double>(m * scale));
    }
  }
}

// vLLM's names with "vllm:" replaced. promtool's linter flags the colon (it is meant for
// recording rules) but parses the exposition; mirroring vLLM is worth that one lint message.
constexpr std::string_view kMetricPrefix = "pagoda:";

std::string metric(std::string_view name) {
  return std::string(kMetricPrefix) + std::string(name);
}

// vLLM's finished_reason values; "error" is an engine-side failure (a step that threw, or a
// shutdown past the grace period), which the client sees as an error, not as a finish.
constexpr std::array<std::string_view, 4> kFinishReasons = {"stop", "length", "abort", "error"};

// The structured-output compiler: each constrained request's wait for its compiled constraint
// (answered by the cache, or started and finished under one outcome), the compiles themselves
// and the queue in front of the workers.
void render_compiles(const structured::CompilerStats& c, const MetricLabels& model,
                     PrometheusWriter& w) {
  const auto counter = [&](std::string_view name, std::string_view help, std::int64_t value) {
    w.family(metric(name), "counter", help);
    w.sample(metric(name), model, static_cast<double>(value));
  };
  const auto gauge = [&](std::string_view name, std::string_view help, std::int64_t value) {
    w.family(metric(name), "gauge", help);
    w.sample(metric(name), model, static_cast<double>(value));
  };
  counter("structured_output_compile_cache_queries_total",
          "Structured-output constraints looked up in the compiled-grammar cache (one per "
          "constrained request).",
          c.cache_queries);
  counter("structured_output_compile_cache_hits_total",
          "Structured-output constraints answered from the compiled-grammar cache (errors "
          "included).",
          c.cache_hits);
  counter("structured_output_compiles_started_total",
          "Constrained requests that waited for a compile (cache misses).", c.waits_started);
  w.family(metric("structured_output_compiles_finished_total"), "counter",
           "Constrained requests' compile waits by outcome: ok, invalid (400), timeout (400), "
           "queue_full (503), cancelled (client left), shutdown (503).");
  for (std::size_t i = 0; i < structured::kNumCompileOutcomes; ++i) {
    MetricLabels labels = model;
    labels.emplace_back(
        "outcome", structured::compile_outcome_name(static_cast<structured::CompileOutcome>(i)));
    w.sample(metric("structured_output_compiles_finished_total"), labels,
             static_cast<double>(c.waits_finished[i]));
  }
  Histogram::Snapshot time{
      .bounds = {structured::kCompileTimeBuckets.begin(), structured::kCompileTimeBuckets.end()},
      .sum = c.compile_seconds,
      .count = c.compiles_finished};
  std::int64_t cumulative = 0;
  for (std::size_t i = 0; i < structured::kCompileTimeBuckets.size(); ++i) {
    cumulative += c.compile_time_buckets[i];
    time.cumulative.push_back(cumulative);
  }
  w.family(metric("structured_output_compile_time_seconds"), "histogram",
           "Time to compile one structured-output constraint (one per spec, however many "
           "requests share it), in seconds.");
  w.histogram(metric("structured_output_compile_time_seconds"), model, time);
  gauge("structured_output_compile_queue_depth", "Structured-output compiles waiting for a worker.",
        c.queued);
  gauge("structured_output_compiles_running", "Structured-output compiles on a worker.", c.running);
  gauge("structured_output_compile_cache_bytes", "Bytes held by the compiled-grammar cache.",
        static_cast<std::int64_t>(c.cache_bytes));
}

}  // namespace

ServingMetrics::ServingMetrics(std::string model_name, std::int64_t max_model_len)
    : model_name_(std::move(model_name)),
      time_to_first_token_(ttft_buckets()),
      inter_token_latency_(token_latency_buckets()),
      time_per_output_token_(token_latency_buckets()),
      e2e_request_latency_(request_latency_buckets()),
      request_queue_time_(request_latency_buckets()),
      request_inference_time_(request_latency_buckets()),
      request_prefill_time_(request_latency_buckets()),
      request_decode_time_(request_latency_buckets()),
      request_prompt_tokens_(token_count_buckets(std::max<std::int64_t>(max_model_len, 1))),
      request_generation_tokens_(token_count_buckets(std::max<std::int64_t>(max_model_len, 1))) {}

void ServingMetrics::record_finished(const engine::StreamOutput& final_output) {
  const engine::RequestOutput& out = final_output.output;
  const engine::RequestTimings& t = out.timings;
  const engine::RequestUsage& usage = out.usage;
  if (auto v = t.time_to_first_token()) time_to_first_token_.observe(*v);
  for (const double gap : t.inter_token_latencies) inter_token_latency_.observe(gap);
  if (auto v = t.time_per_output_token(usage.num_completion_tokens)) {
    time_per_output_token_.observe(*v);
  }
  if (auto v = t.end_to_end_latency()) e2e_request_latency_.observe(*v);
  if (auto v = t.queue_time()) request_queue_time_.observe(*v);
  if (t.first_scheduled_time && t.finished_time) {
    request_inference_time_.observe(*t.finished_time - *t.first_scheduled_time);
  }
  if (t.first_scheduled_time && t.first_token_time) {
    request_prefill_time_.observe(*t.first_token_time - *t.first_scheduled_time);
  }
  if (t.first_token_time && t.last_token_time) {
    request_decode_time_.observe(*t.last_token_time - *t.first_token_time);
  }
  request_prompt_tokens_.observe(static_cast<double>(usage.num_prompt_tokens));
  request_generation_tokens_.observe(static_cast<double>(usage.num_completion_tokens));

  const std::string_view reason = final_output.error.ok() ? out.finish_reason() : "error";
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < kFinishReasons.size(); ++i) {
    if (kFinishReasons[i] == reason) ++request_success_[i];
  }
  prompt_tokens_ += usage.num_prompt_tokens;
  cached_prompt_tokens_ += usage.num_cached_prompt_tokens;
}

void ServingMetrics::record_rejected(int http_status) {
  std::lock_guard lock(mutex_);
  const auto it = std::find_if(rejected_by_status_.begin(), rejected_by_status_.end(),
                               [&](const auto& entry) { return entry.first == http_status; });
  if (it != rejected_by_status_.end()) {
    ++it->second;
  } else {
    rejected_by_status_.emplace_back(http_status, 1);
    std::sort(rejected_by_status_.begin(), rejected_by_status_.end());
  }
}

std::string ServingMetrics::render(const engine::EngineStats& stats,
                                   const structured::CompilerStats* compiles) const {
  const MetricLabels model = {{"model_name", model_name_}};
  PrometheusWriter w;
  auto gauge = [&](std::string_view name, std::string_view help, double value) {
    w.family(name, "gauge", help);
    w.sample(name, model, value);
  };
  auto counter = [&](std::string_view name, std::string_view help, double value) {
    w.family(name, "counter", help);
    w.sample(name, model, value);
  };
  auto histogram = [&](std::string_view name, std::string_view help, const Histogram& h) {
    w.family(name, "histogram", help);
    w.histogram(name, model, h.snapshot());
  };

  gauge(metric("num_requests_running"), "Requests in the running batch.",
        static_cast<double>(stats.num_running));
  gauge(metric("num_requests_waiting"), "Requests waiting to be admitted.",
        static_cast<double>(stats.num_waiting));
  gauge(metric("kv_cache_usage_perc"), "Fraction of KV-cache blocks in use (1 means 100 percent).",
        stats.kv_cache_usage);
  gauge(metric("num_kv_cache_blocks"), "KV-cache blocks in the pool.",
        static_cast<double>(stats.num_kv_blocks));
  counter(metric("num_preemptions_total"), "Requests preempted to free KV-cache blocks.",
          static_cast<double>(stats.num_preemptions));
  counter(metric("prefix_cache_queries_total"), "Prompt tokens looked up in the prefix cache.",
          static_cast<double>(stats.prefix_cache_queries));
  counter(metric("prefix_cache_hits_total"), "Prompt tokens served from the prefix cache.",
          static_cast<double>(stats.prefix_cache_hits));
  counter(metric("engine_steps_total"), "Engine steps run.", static_cast<double>(stats.num_steps));
  counter(metric("scheduled_decode_tokens_total"),
          "Tokens steps ran as decode rows (a request's last known token and its drafts).",
          static_cast<double>(stats.num_scheduled_decode_tokens));
  counter(metric("scheduled_prefill_tokens_total"),
          "Tokens steps ran as prompt chunks (or a preempted request's recompute).",
          static_cast<double>(stats.num_scheduled_prefill_tokens));
  counter(metric("engine_failed_steps_total"), "Engine steps whose forward pass failed.",
          static_cast<double>(stats.num_failed_steps));
  counter(metric("generation_tokens_total"), "Tokens generated, all requests.",
          static_cast<double>(stats.num_generated_tokens));
  counter(metric("trace_events_written_total"), "Trace events written to the trace sink.",
          static_cast<double>(stats.trace_events_written));
  counter(metric("trace_events_dropped_total"),
          "Trace events dropped (byte-rate or queue limit, or a sink that could not keep up).",
          static_cast<double>(stats.trace_events_dropped));
  counter(metric("trace_bytes_written_total"), "Bytes of trace events written.",
          static_cast<double>(stats.trace_bytes_written));
  counter(metric("trace_engine_seconds_total"),
          "Engine-thread time spent producing trace data, in seconds.", stats.trace_seconds);
  // Structured outputs: the masks' cost, and how much of it the steps waited for.
  counter(metric("structured_output_masks_total"),
          "Allowed-token masks filled for structured-output requests.",
          static_cast<double>(stats.constraint_masks));
  counter(metric("structured_output_mask_seconds_total"),
          "Time spent filling structured-output masks (beside the forward passes), in seconds.",
          stats.constraint_mask_seconds);
  counter(metric("structured_output_mask_wait_seconds_total"),
          "Time steps waited for structured-output masks before sampling, in seconds.",
          stats.constraint_mask_wait_seconds);
  if (compiles) render_compiles(*compiles, model, w);
  // Where the GPU's time went: idle is the device waiting for the host between steps.
  counter(metric("device_steps_total"), "Device steps timed with CUDA events (0 on the CPU).",
          static_cast<double>(stats.device_time.steps));
  counter(metric("device_busy_seconds_total"),
          "Device time from each step's first operation to its last, in seconds.",
          stats.device_time.busy_seconds);
  counter(metric("device_idle_seconds_total"),
          "Device time between one step's end and the next one's start (gaps over 50 ms, when "
          "the engine had no work, excluded), in seconds.",
          stats.device_time.idle_seconds);
  // Speculative decoding (vLLM's spec_decode_* names); zeros without --speculative-config.
  const engine::SpecDecodeStats& spec = stats.spec_decode;
  counter(metric("spec_decode_num_drafts_total"), "Speculative verifications (request-steps).",
          static_cast<double>(spec.num_drafts));
  counter(metric("spec_decode_num_draft_tokens_total"), "Drafted tokens verified.",
          static_cast<double>(spec.num_draft_tokens));
  counter(metric("spec_decode_num_accepted_tokens_total"), "Drafted tokens accepted.",
          static_cast<double>(spec.num_accepted_tokens));
  w.family(metric("spec_decode_num_accepted_tokens_per_pos_total"), "counter",
           "Drafted tokens accepted at each draft position (0 = first).");
  for (std::size_t p = 0; p < spec.num_accepted_tokens_per_pos.size(); ++p) {
    MetricLabels labels = model;
    labels.emplace_back("position", std::to_string(p));
    w.sample(metric("spec_decode_num_accepted_tokens_per_pos_total"), labels,
             static_cast<double>(spec.num_accepted_tokens_per_pos[p]));
  }
  {
    std::lock_guard lock(mutex_);
    counter(metric("prompt_tokens_total"), "Prompt tokens of finished requests.",
            static_cast<double>(prompt_tokens_));
    counter(metric("prompt_tokens_cached_total"),
            "Prompt tokens of finished requests served from the prefix cache.",
            static_cast<double>(cached_prompt_tokens_));
    w.family(metric("request_success_total"), "counter", "Finished requests by finish reason.");
    for (std::size_t i = 0; i < kFinishReasons.size(); ++i) {
      MetricLabels labels = model;
      labels.emplace_back("finished_reason", kFinishReasons[i]);
      w.sample(metric("request_success_total"), labels, static_cast<double>(request_success_[i]));
    }
    w.family(metric("request_rejected_total"), "counter",
             "Requests refused before reaching the engine, by HTTP status.");
    for (const auto& [status, count] : rejected_by_status_) {
      MetricLabels labels = model;
      labels.emplace_back("status_code", std::to_string(status));
      w.sample(metric("request_rejected_total"), labels, static_cast<double>(count));
    }
  }
  histogram(metric("time_to_first_token_seconds"), "Time to first token in seconds.",
            time_to_first_token_);
  histogram(metric("inter_token_latency_seconds"), "Gap between output tokens in seconds.",
            inter_token_latency_);
  histogram(metric("request_time_per_output_token_seconds"),
            "Mean time per output token after the first, per request, in seconds.",
            time_per_output_token_);
  histogram("pagoda:e2e_request_latency_seconds", "Request latency from arrival to finish.",
            e2e_request_latency_);
  histogram(metric("request_queue_time_seconds"), "Time from arrival to first scheduling.",
            request_queue_time_);
  histogram(metric("request_inference_time_seconds"), "Time from first scheduling to finish.",
            request_inference_time_);
  histogram(metric("request_prefill_time_seconds"),
            "Time from first scheduling to the first token.", request_prefill_time_);
  histogram(metric("request_decode_time_seconds"), "Time from the first to the last token.",
            request_decode_time_);
  histogram(metric("request_prompt_tokens"), "Prompt length of finished requests in tokens.",
            request_prompt_tokens_);
  histogram(metric("request_generation_tokens"), "Generated tokens of finished requests.",
            request_generation_tokens_);
  return w.text();
}

}  // namespace pagoda::api
