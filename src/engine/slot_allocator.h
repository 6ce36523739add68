// Dense slots for live requests: the lowest free index first, so per-slot arrays (the runner's
// block tables, the executor's sampling state, the engine's request state) stay as short as the
// peak number of live requests.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "common/check.h"

namespace pagoda::engine {

class SlotAllocator {
 public:
  /// The lowest free slot.
  std::int32_t acquire() {
    ++num_used_;
    if (free_.empty()) return next_++;
    const std::int32_t slot = free_.top();
    free_.pop();
    return slot;
  }
  /// Returns `slot` (acquired and not yet released).
  void release(std::int32_t slot) {
    PAGODA_CHECK(slot >= 0 && slot < next_ && num_used_ > 0) << "bad slot release " << slot;
    --num_used_;
    free_.push(slot);
  }
  /// Slots in use.
  std::int32_t num_used() const { return num_used_; }
  /// One past the highest slot ever handed out.
  std::int32_t capacity() const { return next_; }

 private:
  std::priority_queue<std::int32_t, std::vector<std::int32_t>, std::greater<>> free_;
  std::int32_t next_ = 0;
  std::int32_t num_used_ = 0;
};

}  // namespace pagoda::engine
