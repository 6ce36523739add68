// A Prometheus histogram: fixed upper bounds, a count per bucket, the sum and the count of
// observations. Thread-safe; observe() takes a short lock.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace pagoda::api {

/// Observations counted into buckets with inclusive upper bounds (Prometheus `le`).
class Histogram {
 public:
  /// A copy of the state, for rendering.
  struct Snapshot {
    /// Upper bounds, ascending; +Inf is implied after the last.
    std::vector<double> bounds;
    /// Cumulative counts: cumulative[i] observations were <= bounds[i].
    std::vector<std::int64_t> cumulative;
    double sum = 0.0;
    std::int64_t count = 0;
  };

  /// `bounds` must be finite and strictly ascending (checked).
  explicit Histogram(std::vector<double> bounds);

  /// Adds one observation; NaN is ignored.
  void observe(double value);
  /// The state now.
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<std::int64_t> bucket_counts_;  // per bucket, not cumulative; last is +Inf
  double sum_ = 0.0;
  std::int64_t count_ = 0;
};

}  // namespace pagoda::api
