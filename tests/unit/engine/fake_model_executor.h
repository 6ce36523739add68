// A ModelExecutor without a model, for engine tests. Its "K/V cache" stores each token id (and
// position) at its slot; the logits of a row are a pure function of the tokens its sequence has
// in the cache, read back through the block table. So a wrong slot, a stale prefix-cache block
// or a bad block table after preemption changes the tokens that follow, and the same sequence
// always continues the same way whatever it is batched with.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "models/forward_batch_check.h"
#include "pagoda/model_executor.h"
#include "sampling/host_sampling_executor.h"

namespace pagoda::engine::testing {

class FakeModelExecutor final : public sampling::HostSamplingExecutor {
 public:
  explicit FakeModelExecutor(std::int64_t vocab_size = 259, std::int64_t max_model_len = 512,
                             std::int64_t max_num_batched_tokens = 256) {
    info_.vocab_size = vocab_size;
    info_.max_model_len = max_model_len;
    info_.max_num_batched_tokens = max_num_batched_tokens;
    info_.num_layers = 1;
    info_.num_kv_heads = 1;
    info_.head_dim = 1;
  }

  /// forward() call number `call` (0-based) returns INTERNAL; -1: never.
  void fail_at_call(std::int64_t call) { fail_at_ = call; }
  /// While held, forward() waits: a test queues several requests before the first step runs.
  /// hold(false) also cancels a hold_at_call() that no forward() has reached yet.
  void hold(bool held) {
    {
      std::lock_guard lock(hold_mutex_);
      held_ = held;
      if (!held) hold_at_ = -1;
    }
    released_.notify_all();
  }
  /// forward() call number `call` (0-based) starts held, as if hold(true) had come just before
  /// it: a test can act between two steps without racing the engine thread. -1: never. If the
  /// test's hold(false) comes first (a slow engine thread), that call does not hold at all.
  void hold_at_call(std::int64_t call) {
    std::lock_guard lock(hold_mutex_);
    hold_at_ = call;
  }
  /// forward() calls so far.
  std::int64_t num_calls() const { return calls_; }
  /// Most logits rows one forward() call has produced.
  std::int64_t max_logits_rows() const { return max_logits_rows_; }
  /// Sampling slots open now (opened and not closed).
  std::int64_t num_open_slots() const {
    std::lock_guard lock(count_mutex_);
    return static_cast<std::int64_t>(open_slots_.size());
  }
  /// Most steps launched and not yet collected at once, and launches with tokens in flight.
  std::int64_t max_steps_in_flight() const { return max_in_flight_; }
  std::int64_t num_launches_with_previous_tokens() const { return launches_with_previous_; }

  Status open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) override {
    Status s = HostSamplingExecutor::open_sampling_slot(slot, config);
    std::lock_guard lock(count_mutex_);
    if (s.ok()) open_slots_.insert(slot);
    return s;
  }
  void close_sampling_slot(std::int32_t slot) override {
    HostSamplingExecutor::close_sampling_slot(slot);
    std::lock_guard lock(count_mutex_);
    open_slots_.erase(slot);
  }
  Status launch_step(const ForwardBatch& batch, const SamplingBatch& sampling) override {
    for (const PreviousToken& p : batch.from_previous_step) {
      // The engine's placeholder reaches the executor, which alone fills it in.
      if (batch.token_ids[static_cast<std::size_t>(p.token_row)] != ForwardBatch::kTokenInFlight) {
        return internal_error("a token in flight arrived with an id");
      }
    }
    Status s = HostSamplingExecutor::launch_step(batch, sampling);
    if (s.ok()) {
      max_in_flight_ = std::max<std::int64_t>(max_in_flight_, ++in_flight_);
      if (!batch.from_previous_step.empty()) ++launches_with_previous_;
    }
    return s;
  }
  Status collect_step(StepOutput& out) override {
    Status s = HostSamplingExecutor::collect_step(out);
    if (s.ok()) --in_flight_;
    return s;
  }

  const ModelExecutorInfo& info() const override { return info_; }
  std::int64_t kv_cache_bytes_per_block(std::int64_t block_size) const override {
    return block_size * 8;
  }
  Status allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) override {
    num_blocks_ = num_blocks;
    block_size_ = block_size;
    slots_.assign(static_cast<std::size_t>(num_blocks * block_size), -1);
    return Status::ok_status();
  }
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  std::int64_t kv_block_size() const override { return block_size_; }

  Status forward(const ForwardBatch& batch, float* logits) override {
    {
      std::unique_lock lock(hold_mutex_);
      if (calls_ == hold_at_) held_ = true;
      released_.wait(lock, [&] { return !held_; });
    }
    if (calls_++ == fail_at_) return internal_error("injected executor failure");
    PAGODA_RETURN_IF_ERROR(models::check_forward_batch(
        batch, {info_.vocab_size, info_.max_model_len, info_.max_num_batched_tokens, num_blocks_,
                block_size_}));
    for (std::int64_t t = 0; t < batch.num_tokens(); ++t) {
      if (batch.slot_mapping[t] < 0) continue;
      slots_[static_cast<std::size_t>(batch.slot_mapping[t])] =
          std::int64_t{batch.token_ids[t]} * 1000003 + batch.positions[t];
    }
    if (batch.num_logits() > max_logits_rows_) max_logits_rows_ = batch.num_logits();
    std::size_t seq = 0;
    for (std::int64_t r = 0; r < batch.num_logits(); ++r) {
      const std::int32_t row = batch.logits_indices[r];
      while (batch.query_start_loc[seq + 1] <= row) ++seq;
      fill_row(batch, seq, batch.positions[row], logits + r * info_.vocab_size);
    }
    return Status::ok_status();
  }

 private:
  static std::uint64_t mix(std::uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
  }

  // Hash of the cached sequence up to `last_pos`; one clear favourite among the byte tokens
  // (never EOS, so requests run to max_tokens) over a spread of random logits for sampling.
  void fill_row(const ForwardBatch& batch, std::size_t seq, std::int64_t last_pos, float* out) {
    const std::int32_t* table = batch.block_tables.data() + seq * batch.max_blocks_per_seq;
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (std::int64_t p = 0; p <= last_pos; ++p) {
      const std::int64_t slot =
          std::int64_t{table[p / block_size_]} * block_size_ + p % block_size_;
      h = mix(h ^ static_cast<std::uint64_t>(slots_[static_cast<std::size_t>(slot)]));
    }
    for (std::int64_t j = 0; j < info_.vocab_size; ++j) {
      out[j] = static_cast<float>(mix(h + static_cast<std::uint64_t>(j)) % 1000) / 400.0f;
    }
    out[h % 256] += 6.0f;
  }

  ModelExecutorInfo info_;
  std::int64_t num_blocks_ = 0;
  std::int64_t block_size_ = 0;
  std::vector<std::int64_t> slots_;
  std::atomic<std::int64_t> calls_{0};
  std::atomic<std::int64_t> max_logits_rows_{0};
  std::int64_t fail_at_ = -1;
  // The check of hold_at_ in forward() and hold(false) are one critical section: a release can
  // never come between forward()'s check and its wait (the engine thread would wait forever).
  std::mutex hold_mutex_;
  std::condition_variable released_;
  bool held_ = false;
  std::int64_t hold_at_ = -1;
  mutable std::mutex count_mutex_;
  std::set<std::int32_t> open_slots_;
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::int64_t> max_in_flight_{0};
  std::atomic<std::int64_t> launches_with_previous_{0};
};

}  // namespace pagoda::engine::testing
