// Helpers for tests that drive the engine through EngineClient over FakeModelExecutor and the
// byte tokenizer.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "byte_tokenizer_for_test.h"
#include "engine/engine_client.h"
#include "fake_model_executor.h"

namespace pagoda::engine {

using testing::FakeModelExecutor;

struct Engine {
  std::unique_ptr<EngineClient> client;
  FakeModelExecutor* executor = nullptr;
};

inline Engine make_engine(EngineConfig config = {}) {
  auto executor = std::make_unique<FakeModelExecutor>();
  FakeModelExecutor* raw = executor.get();
  if (config.scheduler.max_num_batched_tokens == 2048) config.scheduler.max_num_batched_tokens = 64;
  if (config.cache.num_blocks == 0 && !config.kv_cache_memory_bytes) config.cache.num_blocks = 256;
  config.eos_token_id = kEos;
  auto client = EngineClient::create(config, std::move(executor), make_byte_tokenizer());
  EXPECT_TRUE(client.ok()) << client.status().to_string();
  return {client.ok() ? std::move(*client) : nullptr, raw};
}

inline EngineRequest request(std::vector<std::int32_t> prompt, std::int64_t max_tokens) {
  EngineRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0;
  return r;
}

inline std::vector<std::int32_t> prompt_of(int seed, int len) {
  std::vector<std::int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back((seed * 31 + i * 7) % 256);
  return p;
}

struct Collected {
  std::map<std::int64_t, std::vector<std::int32_t>> tokens;  // by sample index
  std::map<std::int64_t, StreamOutput> finals;
  int num_outputs = 0;
};

inline Collected collect(OutputStream& stream) {
  Collected c;
  while (true) {
    auto item = stream.next(std::chrono::seconds(30));
    if (!item.ok()) {
      EXPECT_EQ(item.status().code(), StatusCode::kOutOfRange) << item.status().to_string();
      break;
    }
    ++c.num_outputs;
    auto& t = c.tokens[item->index];
    t.insert(t.end(), item->output.token_ids.begin(), item->output.token_ids.end());
    if (item->output.finished) {
      EXPECT_FALSE(c.finals.contains(item->index)) << "two final outputs";
      c.finals[item->index] = std::move(*item);
    }
  }
  return c;
}

// A final output follows the stats that count its request gone, but with overlapped steps an
// aborted request's blocks and slot come back only once the step in flight is collected.
inline EngineStats settled_stats(const EngineClient& client) {
  for (int i = 0; i < 400 && (client.stats().kv_cache_usage > 0.0 || client.num_in_flight() > 0);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return client.stats();
}

}  // namespace pagoda::engine
