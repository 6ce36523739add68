// Served models for the protocol tests: a byte-level tokenizer (id b is byte b) with a tiny
// ChatML-like template, so validation tests run without model files, and the real default model
// (SmolLM2 GGUF: its tokenizer and chat template) where the real thing matters.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "../engine/byte_tokenizer_for_test.h"
#include "api/api_error.h"
#include "api/served_model.h"
#include "model/model_files.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda::api::testing {

inline constexpr std::int64_t kByteModelMaxLen = 64;

inline const char* kByteTemplate =
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|eos|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/// Names "test-model" and "alias"; max_model_len 64; vocabulary of 259 (bytes + 3 added).
inline ServedModel byte_model(bool with_template = true) {
  std::optional<ChatTemplate> chat_template;
  if (with_template) {
    auto compiled = ChatTemplate::compile(kByteTemplate);
    PAGODA_CHECK(compiled.ok()) << compiled.status().to_string();
    chat_template = std::move(*compiled);
  }
  std::shared_ptr<const Tokenizer> tokenizer = engine::make_byte_tokenizer();
  auto model = make_served_model({"test-model", "alias"}, "/models/test", std::move(tokenizer),
                                 std::move(chat_template), kByteModelMaxLen);
  PAGODA_CHECK(model.ok()) << model.status().to_string();
  return std::move(*model);
}

inline const std::string kSmolLm2Path =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The default model's tokenizer and template (loaded once), or nullptr when the file is absent.
inline const ServedModel* smollm2_model() {
  static const std::optional<ServedModel> model = []() -> std::optional<ServedModel> {
    if (!std::filesystem::exists(kSmolLm2Path)) return std::nullopt;
    auto files = open_model_files(kSmolLm2Path);
    PAGODA_CHECK(files.ok()) << files.status().to_string();
    auto tokenizer = load_tokenizer_from_gguf(*files->gguf);
    PAGODA_CHECK(tokenizer.ok()) << tokenizer.status().to_string();
    PAGODA_CHECK(files->chat_template.has_value()) << "SmolLM2 ships a chat template";
    auto chat_template = ChatTemplate::compile(*files->chat_template);
    PAGODA_CHECK(chat_template.ok()) << chat_template.status().to_string();
    auto served = make_served_model({"SmolLM2-135M-Instruct"}, kSmolLm2Path,
                                    std::shared_ptr<const Tokenizer>(std::move(*tokenizer)),
                                    std::move(*chat_template), 2048, files->generation);
    PAGODA_CHECK(served.ok()) << served.status().to_string();
    return std::move(*served);
  }();
  return model ? &*model : nullptr;
}

/// Parses JSON text in the tests' bodies.
inline Json json(const std::string& text) {
  return Json::parse(text);
}

}  // namespace pagoda::api::testing
