// The request ids of the Generate calls in flight: Abort finds requests here, a second call
// with a live id is refused, and a draining server waits here until the calls have ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

namespace pagoda::grpc {

/// A thread-safe set of live request ids.
class RequestRegistry {
 public:
  /// Adds `request_id`; false when it is already in flight.
  bool add(const std::string& request_id);
  /// Removes `request_id` (its call has ended).
  void remove(const std::string& request_id);
  bool contains(const std::string& request_id) const;
  /// What Abort must do for `request_id` besides aborting it in the engine: a call whose
  /// request has not reached the engine yet (its constraint compiling) ends itself. Kept until
  /// the id is removed; ignored for an id not in flight.
  void set_abort_hook(const std::string& request_id, std::function<void()> hook);
  /// `request_id`'s hook, empty when it has none (call it without holding other locks).
  std::function<void()> abort_hook(const std::string& request_id) const;
  std::size_t size() const;
  /// Waits until no call is in flight or `timeout` passes; true when none is.
  bool wait_until_empty(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable emptied_;
  std::unordered_map<std::string, std::function<void()>> ids_;  // id -> abort hook
};

}  // namespace pagoda::grpc
