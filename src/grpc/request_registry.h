// The request ids of the Generate calls in flight: Abort finds requests here, a second call
// with a live id is refused, and a draining server waits here until the calls have ended.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>

namespace pagoda::grpc {

/// A thread-safe set of live request ids.
class RequestRegistry {
 public:
  /// Adds `request_id`; false when it is already in flight.
  bool add(const std::string& request_id);
  /// Removes `request_id` (its call has ended).
  void remove(const std::string& request_id);
  bool contains(const std::string& request_id) const;
  std::size_t size() const;
  /// Waits until no call is in flight or `timeout` passes; true when none is.
  bool wait_until_empty(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable emptied_;
  std::unordered_set<std::string> ids_;
};

}  // namespace pagoda::grpc
