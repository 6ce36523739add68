// Which layers share a KV block table (docs/kv_cache_groups.md): the full-attention layers in
// group 0 and, when a model mixes them with sliding-window layers (Gemma 3: five of every six),
// the sliding layers in groups of as many, whose tables keep only the blocks the window can
// still see. Every group takes its blocks from one pool, so a block is a page of that many
// layers' memory whichever group holds it: the k-th layer of each group uses memory slot k
// (kv_cache_slot).
#pragma once

#include <cstdint>
#include <vector>

#include "models/architecture.h"
#include "pagoda/model_config.h"
#include "pagoda/model_executor.h"

namespace pagoda::models {

/// Sets info.kv_group_windows and info.kv_group_of_layer from config.layer_types: one group {0}
/// unless `architecture`'s layer loop applies windows and the model has both full and sliding
/// layers (with a window).
void set_kv_cache_groups(const Architecture& architecture, const ModelConfig& config,
                         ModelExecutorInfo& info);

/// [num_layers]: each layer's memory slot, its index among its group's layers (every layer
/// its own slot with one group); the executor keeps one K and one V pool per slot.
std::vector<std::int64_t> kv_cache_slots(const ModelExecutorInfo& info);

}  // namespace pagoda::models
