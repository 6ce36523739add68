// A token bucket over bytes: up to `bytes_per_second` on average, bursts up to one second's
// worth. Not thread-safe (the sink calls it under its own lock).
#pragma once

#include <algorithm>
#include <cstddef>

namespace pagoda::trace {

class ByteRateLimiter {
 public:
  /// `bytes_per_second` <= 0: no limit.
  explicit ByteRateLimiter(double bytes_per_second) : rate_(bytes_per_second), tokens_(rate_) {}

  /// Whether `bytes` may pass at time `now` (seconds, any monotonic origin); takes them if so.
  bool allow(std::size_t bytes, double now) {
    if (rate_ <= 0) return true;
    if (last_ >= 0) tokens_ = std::min(rate_, tokens_ + (now - last_) * rate_);
    last_ = now;
    if (static_cast<double>(bytes) > tokens_) return false;
    tokens_ -= static_cast<double>(bytes);
    return true;
  }

 private:
  double rate_;
  double tokens_;
  double last_ = -1.0;
};

}  // namespace pagoda::trace
