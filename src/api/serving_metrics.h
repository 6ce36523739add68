// The server's /metrics: vLLM's metric set under the `pagoda:` prefix, so dashboards built for
// vLLM work after renaming the prefix. Gauges and engine counters are read from EngineStats at
// scrape time; per-request counters and latency histograms are fed by each finished request.
// Every sample carries model_name="<served name>". docs/api.md lists the metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/histogram.h"
#include "engine/engine_core.h"
#include "engine/output_channel.h"
#include "engine/request_output.h"
#include "structured/constraint_compiler.h"

namespace pagoda::api {

/// The metric registry of one served model. Thread-safe.
class ServingMetrics {
 public:
  /// `max_model_len` bounds the token-count histograms' buckets (1, 2, 5, 10, 20, 50, ...).
  explicit ServingMetrics(std::string model_name, std::int64_t max_model_len = 1 << 20);

  /// Records one engine request's final output (each of n samples is one engine request, as in
  /// vLLM v1), however it ended: the request_success_total counter under its finish reason
  /// ("stop", "length", "abort", or "error" when the engine ended it with an error), token
  /// counters and histograms, latencies. Frontends call it exactly once per final output, also
  /// for requests whose client has gone.
  void record_finished(const engine::StreamOutput& final_output);
  /// Records a request refused before it reached the engine (bad input, full queue), by HTTP
  /// status.
  void record_rejected(int http_status);

  /// The text exposition of every metric, with gauges and engine counters from `stats` and,
  /// when given, the structured-output compiler's from `compiles`.
  std::string render(const engine::EngineStats& stats,
                     const structured::CompilerStats* compiles = nullptr) const;

 private:
  static constexpr std::size_t kNumFinishReasons = 4;  // stop, length, abort, error

  const std::string model_name_;
  Histogram time_to_first_token_;
  Histogram inter_token_latency_;
  Histogram time_per_output_token_;
  Histogram e2e_request_latency_;
  Histogram request_queue_time_;
  Histogram request_inference_time_;
  Histogram request_prefill_time_;
  Histogram request_decode_time_;
  Histogram request_prompt_tokens_;
  Histogram request_generation_tokens_;

  mutable std::mutex mutex_;  // guards the counters below
  std::array<std::int64_t, kNumFinishReasons> request_success_{};
  std::int64_t prompt_tokens_ = 0;
  std::int64_t cached_prompt_tokens_ = 0;
  std::vector<std::pair<int, std::int64_t>> rejected_by_status_;
};

}  // namespace pagoda::api
