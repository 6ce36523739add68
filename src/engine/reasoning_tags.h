// The text that opens and closes a model's thinking span, chosen per model family with
// --reasoning-parser (vLLM's names). Output processing splits the span into reasoning_content;
// the reasoning budget closes it by forcing `end`.
#pragma once

#include <string>
#include <string_view>

#include "pagoda/status.h"

namespace pagoda::engine {

struct ReasoningTags {
  std::string start;
  std::string end;
};

/// Tags of a --reasoning-parser name: "deepseek_r1", "qwen3" and "think" all use
/// <think>...</think>. INVALID_ARGUMENT listing the known names otherwise.
StatusOr<ReasoningTags> reasoning_tags_for_parser(std::string_view name);

/// Budgets that `reasoning_effort` maps to (--reasoning-effort-budgets), in tokens.
struct ReasoningEffortBudgets {
  std::int64_t low = 512;
  std::int64_t medium = 2048;
  std::int64_t high = 8192;
};

}  // namespace pagoda::engine
