// The threads load-time work runs on (quantizers, GPU layouts, --load-format dummy draws). A
// whole model's weights pass through them at start-up, and every row (or element) is computed
// alone, so any split over threads gives the same bytes.
#pragma once

#include <cstdint>
#include <functional>

namespace pagoda::quant {

/// One per hardware thread, at most 16.
int load_threads();

/// Calls fn(begin, end) on disjoint ranges of at most `grain` items covering [0, n), claimed in
/// order by up to `num_threads` threads (the caller's included), and returns when all are done.
/// fn must write only the outputs of its own items.
void parallel_ranges(std::int64_t n, std::int64_t grain,
                     const std::function<void(std::int64_t begin, std::int64_t end)>& fn,
                     int num_threads = load_threads());

}  // namespace pagoda::quant
