#include "models/kv_cache_groups.h"

#include <algorithm>

namespace pagoda::models {

// Groups of S layers, S = the number of full layers: group 0 the full layers, then the sliding
// layers in order, S to a group (the last may have fewer). Gemma 3 270M, layers 0..17 with 5, 11
// and 17 full: group 0 = {5, 11, 17}, group 1 = {0, 1, 2}, group 2 = {3, 4, 6}, ...,
// group 5 = {14, 15, 16}. A block is then a page of S layers' memory whichever group holds it.
void set_kv_cache_groups(const Architecture& architecture, const ModelConfig& config,
                         ModelExecutorInfo& info) {
  info.kv_group_windows = {0};
  info.kv_group_of_layer.clear();
  const auto& types = config.layer_types;
  const auto num_full = std::count(types.begin(), types.end(), AttentionType::kFull);
  const auto num_sliding = std::count(types.begin(), types.end(), AttentionType::kSliding);
  // A model whose layers all slide keeps one full table: there is no group to pair them with.
  if (!architecture.sliding_window_layers || num_full == 0 || num_sliding == 0 ||
      config.sliding_window <= 0) {
    return;
  }
  std::int64_t sliding_seen = 0;
  for (const AttentionType type : types) {
    if (type == AttentionType::kFull) {
      info.kv_group_of_layer.push_back(0);
      continue;
    }
    const auto group = static_cast<std::int32_t>(1 + sliding_seen++ / num_full);
    info.kv_group_of_layer.push_back(group);
    if (group >= static_cast<std::int32_t>(info.kv_group_windows.size())) {
      info.kv_group_windows.push_back(config.sliding_window);
    }
  }
}

std::vector<std::int64_t> kv_cache_slots(const ModelExecutorInfo& info) {
  std::vector<std::int64_t> slots;
  if (info.kv_group_of_layer.empty()) {
    for (std::int64_t layer = 0; layer < info.num_layers; ++layer) slots.push_back(layer);
    return slots;
  }
  std::vector<std::int64_t> seen(static_cast<std::size_t>(info.num_kv_groups()), 0);
  for (const std::int32_t group : info.kv_group_of_layer) {
    slots.push_back(seen[static_cast<std::size_t>(group)]++);
  }
  return slots;
}

}  // namespace pagoda::models
