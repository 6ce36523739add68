// What a frontend serves: the model's public names, its tokenizer and chat template, and the
// limits requests are checked against. Built once at startup, then shared read-only by every
// request thread (HTTP and gRPC alike).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/reasoning_tags.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"
#include "structured/constraint_compiler.h"
#include "template/chat_template.h"
#include "tools/tool_call_format.h"

namespace pagoda::api {

/// The served model as the protocol layer sees it. Immutable after startup; thread-safe to read.
struct ServedModel {
  /// --served-model-name values (at least one); the first is the one /v1/models reports as
  /// `id`, every one is accepted in a request's `model`.
  std::vector<std::string> names;
  /// The model path it was loaded from (/v1/models `root`).
  std::string root;
  std::shared_ptr<const Tokenizer> tokenizer;
  /// The compiled chat template; unset means /v1/chat/completions answers 400.
  std::optional<ChatTemplate> chat_template;
  /// Texts the chat template sees as bos_token / eos_token.
  std::string bos_token;
  std::string eos_token;
  /// Longest prompt + completion, in tokens (the engine's resolved --max-model-len).
  std::int64_t max_model_len = 0;
  /// One more than the largest valid token id.
  std::int64_t vocab_size = 0;
  /// Unix seconds when the server started (/v1/models `created`).
  std::int64_t created = 0;
  /// Sampling defaults from generation_config.json, used where a request leaves a field unset
  /// (vLLM's --generation-config auto).
  GenerationDefaults generation;
  /// Set when the engine follows a thinking span (--reasoning-parser): what reasoning_effort
  /// means in tokens. Chat responses then carry reasoning_content; unset refuses
  /// max_reasoning_tokens and reasoning_effort.
  std::optional<engine::ReasoningEffortBudgets> reasoning;
  /// Compiles structured-output constraints for this model's vocabulary (thread-safe, cached);
  /// null refuses them.
  std::shared_ptr<structured::ConstraintCompiler> constraints;
  /// --enable-auto-tool-choice with --tool-call-parser: how tool_choice "auto" reads calls out of
  /// the output (src/tools/); null leaves auto's output as text.
  std::shared_ptr<const tools::ToolCallFormat> tool_call_parser;

  /// The name /v1/models reports.
  const std::string& name() const { return names.front(); }
  /// Whether `model` is one of `names`.
  bool serves(std::string_view model) const;
};

/// A ServedModel for `tokenizer`: bos/eos texts from the tokenizer's special tokens, vocab_size
/// from it, created = now. INVALID_ARGUMENT when `names` is empty or max_model_len < 2.
StatusOr<ServedModel> make_served_model(std::vector<std::string> names, std::string root,
                                        std::shared_ptr<const Tokenizer> tokenizer,
                                        std::optional<ChatTemplate> chat_template,
                                        std::int64_t max_model_len,
                                        GenerationDefaults generation = {});

}  // namespace pagoda::api
