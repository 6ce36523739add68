#include "api/histogram.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace pagoda::api {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), bucket_counts_(bounds_.size() + 1, 0) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    PAGODA_CHECK(std::isfinite(bounds_[i])) << "histogram bound " << i << " is not finite";
    PAGODA_CHECK(i == 0 || bounds_[i - 1] < bounds_[i]) << "histogram bounds must ascend";
  }
}

void Histogram::observe(double value) {
  if (std::isnan(value)) return;
  // `le` is inclusive: the first bound >= value.
  const auto bucket = static_cast<std::size_t>(
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mutex_);
  ++bucket_counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  std::lock_guard lock(mutex_);
  std::int64_t running = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    running += bucket_counts_[i];
    snapshot.cumulative.push_back(running);
  }
  snapshot.sum = sum_;
  snapshot.count = count_;
  return snapshot;
}

}  // namespace pagoda::api
