// Latency record of one request, on the engine's monotonic clock (seconds, the same clock as
// RequestOptions::arrival_time). The engine reads its clock once per step and passes that time
// in, so every request of a step shares one timestamp and tests use plain numbers, never sleep.
//
//   arrival     first scheduled     first token       token   token        finished
//      |<-- queue -->|                   |<-- itl -->|<-itl->|               |
//      |<----------- time to first token --->|                               |
//      |<-------------------------------- end to end ----------------------->|
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pagoda::engine {

/// When a request reached each milestone, and the latencies derived from them.
struct RequestTimings {
  /// When the request entered the engine.
  double arrival_time = 0.0;
  /// First time the scheduler gave it tokens (preemption does not move it).
  std::optional<double> first_scheduled_time;
  /// Step that produced its first output token.
  std::optional<double> first_token_time;
  /// Step that produced its latest output token.
  std::optional<double> last_token_time;
  /// When the final output was made (finish or abort).
  std::optional<double> finished_time;
  /// Gap between consecutive steps that produced tokens; one entry per step after the first
  /// (a step that yields several tokens, as speculative decoding does, counts once).
  std::vector<double> inter_token_latencies;

  /// Records the first scheduling; later calls (after preemption) are ignored.
  void record_scheduled(double now);
  /// Records a step that produced output tokens.
  void record_tokens(double now);
  /// Records the end.
  void record_finished(double now);

  /// arrival -> first scheduled.
  std::optional<double> queue_time() const;
  /// arrival -> first token.
  std::optional<double> time_to_first_token() const;
  /// arrival -> finished.
  std::optional<double> end_to_end_latency() const;
  /// Mean gap per token after the first (vLLM's TPOT): (last - first token time) divided by
  /// num_output_tokens - 1; nullopt with fewer than two tokens.
  std::optional<double> time_per_output_token(std::int64_t num_output_tokens) const;
};

}  // namespace pagoda::engine
