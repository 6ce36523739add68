#include "engine/cache_config.h"

#include <string>

namespace pagoda::engine {

Status CacheConfig::validate() const {
  // Block ids travel as int32 in block tables.
  constexpr std::int64_t kMaxBlocks = (std::int64_t{1} << 31) - 1;
  if (num_blocks < 1 || num_blocks > kMaxBlocks) {
    return invalid_argument("num_blocks is " + std::to_string(num_blocks) +
                            "; the KV cache needs between 1 and 2^31-1 blocks (give it more memory "
                            "with --gpu-memory-utilization or a smaller --max-model-len)");
  }
  for (const std::int64_t window : sliding_windows) {
    if (window < 1) {
      return invalid_argument("a sliding-window KV group needs a positive window, got " +
                              std::to_string(window));
    }
  }
  if (block_size < 1 || block_size > 1024) {
    return invalid_argument("block_size is " + std::to_string(block_size) +
                            "; use a value in [1, 1024] (16 is the usual choice)");
  }
  return Status::ok_status();
}

}  // namespace pagoda::engine
