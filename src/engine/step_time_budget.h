// The token budget of a step from a step-time target (issue 26): on the CPU a step's time grows
// with the tokens it carries (a 2,048-token prefill chunk is seconds on a laptop), so a fixed
// --max-num-batched-tokens lets one long prompt hold every running request for that long. The
// budget instead follows what the machine at hand measured: a line
//
//   step seconds ~ a + b * tokens       (a: weights read once a step; b: compute per token)
//
// fitted by least squares over recent steps (exponentially forgotten, so it follows a change of
// load), and budget = (target - a) / b, clamped to [min_tokens, max_tokens]. Nothing per CPU is
// hard-coded: the first steps use a small probe budget, and the fit takes over as steps arrive.
//
// Where the running requests' decodes alone come near the target (a big model, a slow machine, a
// full batch), that budget would leave prompts a few tokens a step: new requests then wait for
// seats that finished ones freed, and the batch settles well below --max-num-seqs (16 streams
// of 128-token prompts and 64-token outputs settled at ~11 decoding, docs/perf/llama_cpp.md).
// So with R running requests a step may always carry kTokensPerRunning x R tokens: each
// request's decode and 3 prompt tokens. That keeps every seat decoding while prompts bring up to
// 3 tokens per output token, and beyond that bounds the inter-token latency prompts cause at
// about 4 decode-only steps, as the target does where it is the larger.
#pragma once

#include <cstdint>

namespace pagoda::engine {

class StepTimeBudget {
 public:
  /// `target_seconds` > 0; 1 <= min_tokens <= max_tokens (the --max-num-batched-tokens cap).
  StepTimeBudget(double target_seconds, std::int64_t min_tokens, std::int64_t max_tokens);

  /// One finished step: how many tokens it ran and how long the forward pass took.
  void observe(std::int64_t tokens, double seconds);
  /// Tokens the next step may carry with `num_running` requests in the batch: the target's
  /// budget or kTokensPerRunning x num_running, whichever is more (within the cap).
  std::int64_t budget(std::int64_t num_running = 0) const;

  /// Before any fit: the probe budget (small, so a first long prompt cannot stall a slow
  /// machine for seconds, large enough to measure the per-token cost).
  static constexpr std::int64_t kProbeTokens = 128;
  /// How fast old steps are forgotten (weight kept per new step).
  static constexpr double kDecay = 0.9;
  /// Tokens a step may always carry per running request (its decode and prompt tokens).
  static constexpr std::int64_t kTokensPerRunning = 4;

 private:
  void refit();

  double target_;
  std::int64_t min_tokens_;
  std::int64_t max_tokens_;
  std::int64_t budget_;
  // Decayed sums over the observed (n, t): weight, n, t, n^2, n*t.
  double s0_ = 0.0, sn_ = 0.0, st_ = 0.0, snn_ = 0.0, snt_ = 0.0;
};

}  // namespace pagoda::engine
