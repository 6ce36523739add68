// Shared set-up for scheduler tests: small configs and a request factory.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "fake_model_runner.h"

namespace pagoda::engine::testing {

struct TestLimits {
  std::int64_t max_num_batched_tokens = 64;
  std::int64_t max_num_seqs = 16;
  std::int64_t max_model_len = 256;
  std::int64_t num_blocks = 64;
  std::int64_t block_size = 16;
  bool prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  std::int64_t long_prefill_token_threshold = 0;
};

inline std::unique_ptr<Scheduler> make_scheduler(const TestLimits& limits) {
  SchedulerConfig config;
  config.max_num_batched_tokens = limits.max_num_batched_tokens;
  config.max_num_seqs = limits.max_num_seqs;
  config.max_model_len = limits.max_model_len;
  config.policy = limits.policy;
  config.long_prefill_token_threshold = limits.long_prefill_token_threshold;
  CacheConfig cache;
  cache.num_blocks = limits.num_blocks;
  cache.block_size = limits.block_size;
  cache.enable_prefix_caching = limits.prefix_caching;
  return std::make_unique<Scheduler>(config, cache);
}

inline std::unique_ptr<Request> make_request(const std::string& id,
                                             std::vector<std::int32_t> prompt,
                                             std::int64_t max_tokens, RequestOptions options = {}) {
  options.max_tokens = max_tokens;
  return std::make_unique<Request>(id, std::move(prompt), std::move(options));
}

/// num_scheduled_tokens of `request_id` in `out`, 0 when not scheduled.
inline std::int64_t scheduled_tokens(const SchedulerOutput& out, const std::string& request_id) {
  for (const ScheduledRequest& s : out.requests) {
    if (s.request_id == request_id) return s.num_scheduled_tokens();
  }
  return 0;
}

/// Runs steps until no request is left (at most `max_steps`), collecting every output token.
inline std::map<std::string, std::vector<std::int32_t>> run_to_completion(Scheduler& scheduler,
                                                                          FakeModelRunner& runner,
                                                                          int max_steps = 10000) {
  std::map<std::string, std::vector<std::int32_t>> outputs;
  for (int step = 0; step < max_steps && scheduler.has_unfinished_requests(); ++step) {
    std::vector<RequestUpdate> updates;
    runner.step(scheduler, &updates);
    for (const RequestUpdate& u : updates) {
      auto& tokens = outputs[u.request_id];
      tokens.insert(tokens.end(), u.new_token_ids.begin(), u.new_token_ids.end());
    }
  }
  return outputs;
}

}  // namespace pagoda::engine::testing
