#include "cli/bench_prompts.h"

#include <array>
#include <random>

#include "cli/model_assets.h"
#include "model/model_files.h"
#include "template/chat_template.h"

namespace pagoda::cli {
namespace {

// Plain prose written for this benchmark: varied vocabulary, no lists or code.
constexpr std::array<const char*, 4> kPassages = {
    "The harbour town woke slowly on winter mornings. Fishing boats returned before sunrise, "
    "their decks crowded with nets and crates, and the gulls followed them in wide circles "
    "over the grey water. By eight the bakery on the corner had sold most of its bread, and "
    "the old men who gathered outside the post office argued about the weather, the price of "
    "fuel and whether the new pier would ever be finished.",
    "A good laboratory notebook records what was done, not what was meant to be done. Each "
    "entry carries the date, the materials with their batch numbers, the exact quantities and "
    "every deviation from the written method. When an experiment fails, the notebook is often "
    "the only way to find out why, so a careful researcher writes down even the details that "
    "seem too obvious to matter at the time.",
    "The library kept its rare maps in a cool room on the third floor. Visitors had to wear "
    "cotton gloves, sign a register and leave their bags at the desk. The oldest map showed "
    "the coastline as sailors had imagined it four centuries ago, with islands that do not "
    "exist and rivers that flow in the wrong direction, yet it was drawn with such care that "
    "people stood in front of it for a long time.",
    "Training for a long race is mostly patience. Runners add distance a little at a time, "
    "rest when their legs ask for it and eat enough to recover between sessions. The hardest "
    "part is not the final week but the middle of the plan, when progress feels slow, the "
    "novelty has worn off and the race day still seems far away. Those who keep going through "
    "that stretch usually reach the start line healthy.",
};

}  // namespace

std::vector<std::vector<std::int32_t>> random_prompts(std::int64_t num_prompts,
                                                      std::int64_t input_len, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> token(1000, 20000);
  std::vector<std::vector<std::int32_t>> prompts(static_cast<std::size_t>(num_prompts));
  for (auto& p : prompts) {
    for (std::int64_t t = 0; t < input_len; ++t) p.push_back(token(rng));
  }
  return prompts;
}

StatusOr<std::vector<std::vector<std::int32_t>>> grounded_prompts(const ModelFiles& tokenizer_files,
                                                                  const Tokenizer& tokenizer,
                                                                  std::int64_t num_prompts,
                                                                  std::uint64_t seed) {
  PAGODA_ASSIGN_OR_RETURN(ChatTemplate chat_template,
                          load_model_chat_template(tokenizer_files, ""));
  std::vector<std::vector<std::int32_t>> prompts;
  for (std::int64_t i = 0; i < num_prompts; ++i) {
    const char* passage = kPassages[(seed + static_cast<std::uint64_t>(i)) % kPassages.size()];
    ChatTemplateInputs inputs;
    inputs.messages.push_back(
        {{"role", "user"},
         {"content",
          std::string("Repeat the following text exactly, word for word:\n\n") + passage}});
    inputs.add_generation_prompt = true;
    if (auto bos = tokenizer.bos_id()) {
      inputs.bos_token = tokenizer.token_to_piece(*bos).value_or("");
    }
    if (auto eos = tokenizer.eos_id()) {
      inputs.eos_token = tokenizer.token_to_piece(*eos).value_or("");
    }
    PAGODA_ASSIGN_OR_RETURN(std::string text, chat_template.render(inputs));
    // The template writes any BOS itself.
    prompts.push_back(tokenizer.encode(text, {.add_special_tokens = false, .parse_special = true}));
  }
  return prompts;
}

}  // namespace pagoda::cli
