// The bounded queue between the engine loop (producer) and one client stream (consumer).
//
// The engine must never wait on a client, so push() never blocks. When a slow consumer lets the
// channel fill up, a new delta is merged into the newest queued output of the same sample
// (text and token ids appended, the newer finish state kept) instead of being queued: the client
// sees fewer, larger deltas and loses nothing. Final outputs are merged the same way, so a
// stream always ends with exactly one final output per sample. Memory per request is therefore
// bounded by `capacity` outputs plus the request's own text.
//
// An asynchronous consumer (the HTTP server) cannot block in pop(); it registers a listener that
// push() calls after queuing, and then drains with try_pop() on its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/request_output.h"
#include "pagoda/status.h"

namespace pagoda::engine {

/// One item of a request's stream.
struct StreamOutput {
  /// Which of the request's n samples this belongs to (0 when n == 1).
  std::int64_t index = 0;
  /// The delta (or the whole result when not streaming).
  RequestOutput output;
  /// Set on a final output when the engine, not the client or the model, ended the request
  /// (an executor error, or shutdown without drain).
  Status error;
};

/// Appends `next` to `into`, as if the two steps had been one.
void merge_stream_output(StreamOutput& into, StreamOutput&& next);

/// Thread-safe: one producer (the engine loop), any consumers.
class OutputChannel {
 public:
  /// Holds `capacity` (>= 1) outputs; the stream ends after `num_samples` final outputs.
  /// `on_final` (optional) runs on the producer's thread as each final output is pushed.
  OutputChannel(std::size_t capacity, std::int64_t num_samples,
                std::function<void()> on_final = nullptr);

  /// Engine side; never blocks. Merges into a queued output when full (see above).
  void push(StreamOutput item);

  /// Waits for the next output until `deadline` (unset: forever). nullopt on timeout or when
  /// every final output has been taken.
  std::optional<StreamOutput> pop(
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);
  /// The next output if one is queued.
  std::optional<StreamOutput> try_pop();
  /// Whether every final output has been taken: nothing more will come.
  bool ended() const;
  /// Outputs merged into others because the channel was full.
  std::int64_t num_coalesced() const;
  /// Calls `listener` on the producer's thread after every push, outside the channel's lock; it
  /// must not block and may run after the consumer has already taken the output (wake-ups can
  /// be spurious). When outputs are already queued, or the stream has ended, it is also called
  /// once right away on the caller's thread, so no wake-up is lost. nullptr removes it.
  void set_listener(std::function<void()> listener);

 private:
  StreamOutput take_front();  // mutex_ held, queue_ not empty

  const std::size_t capacity_;
  const std::function<void()> on_final_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<StreamOutput> queue_;
  std::int64_t finals_left_;
  std::int64_t num_coalesced_ = 0;
  // Shared so push() can call it outside the lock while set_listener() replaces it.
  std::shared_ptr<const std::function<void()>> listener_;
};

}  // namespace pagoda::engine
