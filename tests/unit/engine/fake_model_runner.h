// A model runner for scheduler tests: no model, but it keeps what a real runner keeps (block
// tables applied from diffs, a KV cache of token ids per slot) and checks every step against the
// scheduler's own state. Its "model" is deterministic in (previous token, position), so a
// preempted request recomputes to exactly the tokens it would have produced anyway.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/scheduler.h"

namespace pagoda::engine::testing {

/// Next token of the fake model: never below 100, so small ids can serve as EOS in tests.
inline std::int32_t fake_next_token(std::int32_t previous, std::int64_t position) {
  return 100 + static_cast<std::int32_t>((previous * 7 + position * 13) % 997);
}

class FakeModelRunner {
 public:
  /// Overrides the model for a request: the token for its `num_output`-th output, or -1 to use
  /// fake_next_token.
  using Script =
      std::function<std::int32_t(const std::string& request_id, std::int64_t num_output)>;

  explicit FakeModelRunner(const Scheduler& scheduler, Script script = {})
      : scheduler_(scheduler),
        block_size_(scheduler.kv_cache_manager().block_size()),
        slots_(static_cast<std::size_t>(scheduler.kv_cache_manager().block_pool().num_blocks() *
                                        block_size_),
               -1),
        script_(std::move(script)) {}

  /// Runs one step: writes every scheduled token's "K/V" (its id) into its slot, then checks that
  /// each request's context in the cache equals its tokens, then samples.
  SampledTokens execute(const SchedulerOutput& out) {
    for (const auto& id : out.preempted_request_ids) tables_.erase(id);
    for (const auto& id : out.finished_request_ids) tables_.erase(id);
    for (const ScheduledRequest& s : out.requests) {
      std::vector<std::int32_t>& table = tables_[s.request_id];
      if (s.is_new) {
        table = s.block_ids;
      } else {
        table.insert(table.end(), s.block_ids.begin(), s.block_ids.end());
      }
      for (std::int64_t t = 0; t < s.num_scheduled_tokens(); ++t) {
        slots_[slot(table, s.num_computed_tokens + t)] = s.token_ids[t];
      }
    }
    SampledTokens sampled;
    for (const ScheduledRequest& s : out.requests) {
      const Request* request = scheduler_.find_request(s.request_id);
      EXPECT_NE(request, nullptr) << s.request_id;
      if (request == nullptr) return sampled;
      const std::vector<std::int32_t>& table = tables_[s.request_id];
      EXPECT_EQ(table, request->block_ids()) << s.request_id << ": runner table drifted";
      const std::int64_t seq_len = s.num_computed_tokens + s.num_scheduled_tokens();
      EXPECT_EQ(seq_len, request->num_computed_tokens());
      std::int64_t bad = -1;
      for (std::int64_t p = 0; p < seq_len && bad < 0; ++p) {
        if (slots_[slot(table, p)] != request->token_ids()[p]) bad = p;
      }
      EXPECT_EQ(bad, -1) << s.request_id << ": cache holds the wrong token at this position";
      auto& tokens = sampled.token_ids.emplace_back();
      if (!s.needs_sample) continue;
      std::int32_t next = script_ ? script_(s.request_id, request->num_output_tokens()) : -1;
      if (next < 0) next = fake_next_token(request->token_ids()[seq_len - 1], seq_len);
      tokens.push_back(next);
    }
    return sampled;
  }

  /// schedule -> execute -> update, returning the plan for assertions.
  SchedulerOutput step(Scheduler& scheduler, std::vector<RequestUpdate>* updates = nullptr) {
    SchedulerOutput out = scheduler.schedule();
    std::vector<RequestUpdate> u = scheduler.update_from_output(out, execute(out));
    if (updates) *updates = std::move(u);
    return out;
  }

 private:
  std::size_t slot(const std::vector<std::int32_t>& table, std::int64_t position) const {
    const auto block = static_cast<std::size_t>(position / block_size_);
    EXPECT_LT(block, table.size()) << "position " << position << " beyond the block table";
    if (block >= table.size()) return 0;
    return static_cast<std::size_t>(table[block] * block_size_ + position % block_size_);
  }

  const Scheduler& scheduler_;
  std::int64_t block_size_;
  std::vector<std::int32_t> slots_;
  std::map<std::string, std::vector<std::int32_t>> tables_;
  Script script_;
};

/// The tokens a request would generate alone, from the fake model.
inline std::vector<std::int32_t> expected_output(std::vector<std::int32_t> tokens,
                                                 std::int64_t num_output) {
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < num_output; ++i) {
    const auto seq_len = static_cast<std::int64_t>(tokens.size());
    out.push_back(fake_next_token(tokens.back(), seq_len));
    tokens.push_back(out.back());
  }
  return out;
}

/// A prompt of `n` tokens starting at `first` (ids stay >= 1000 so they never look like EOS).
inline std::vector<std::int32_t> make_prompt(std::int64_t n, std::int32_t first = 1000) {
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) prompt[i] = first + static_cast<std::int32_t>(i);
  return prompt;
}

}  // namespace pagoda::engine::testing
