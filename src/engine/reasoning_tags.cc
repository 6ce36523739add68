#include "engine/reasoning_tags.h"

namespace pagoda::engine {

StatusOr<ReasoningTags> reasoning_tags_for_parser(std::string_view name) {
  if (name == "deepseek_r1" || name == "qwen3" || name == "think") {
    return ReasoningTags{"<think>", "</think>"};
  }
  return invalid_argument("--reasoning-parser \"" + std::string(name) +
                          "\" is not known; use deepseek_r1, qwen3 or think");
}

}  // namespace pagoda::engine
