// The default model as `pagoda serve` serves it with every request feature on (as with
// --reasoning-parser, --enable-auto-tool-choice --tool-call-parser hermes, and structured
// outputs): fuzz_models.h's tokenizer and chat template, named "m", 2048 positions, for the
// targets that validate requests, so that no parameter is refused only for being switched off.
// Needs pagoda_api.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "api/served_model.h"
#include "fuzz_models.h"
#include "structured/constraint_compiler.h"
#include "tools/tool_call_format.h"

namespace pagoda::fuzz {

inline const api::ServedModel& served_model() {
  static const api::ServedModel model = [] {
    const ModelFiles& files = default_model_files();
    const std::shared_ptr<const Tokenizer>& tokenizer = default_tokenizer();
    auto chat_template = ChatTemplate::compile(files.chat_template.value_or(""));
    if (!chat_template.ok()) fail("the default model's chat template", chat_template.status());
    auto served = api::make_served_model({"m"}, files.path, tokenizer, std::move(*chat_template),
                                         2048, files.generation);
    if (!served.ok()) fail("the served model", served.status());
    served->reasoning = engine::ReasoningEffortBudgets{};
    std::vector<std::int32_t> eos;
    if (tokenizer->eos_id()) eos.push_back(*tokenizer->eos_id());
    served->constraints = std::make_shared<structured::ConstraintCompiler>(
        *tokenizer, tokenizer->vocab_size(), std::move(eos));
    auto hermes = tools::make_tool_call_format("hermes");
    if (!hermes.ok()) fail("the hermes tool-call format", hermes.status());
    served->tool_call_parser = std::move(*hermes);
    return std::move(*served);
  }();
  return model;
}

}  // namespace pagoda::fuzz
