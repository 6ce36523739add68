#include "template/chat_template.h"

#include "common/mapped_file.h"
#include "template/jinja/json.h"
#include "template/jinja/template.h"

namespace pagoda {
namespace {

using jinja::Value;

// transformers copies a message's reasoning under the names templates read: `thinking` first
// (gpt-oss reads it) and `reasoning_content` (the standard name), from whichever name was given.
nlohmann::ordered_json alias_reasoning(const nlohmann::ordered_json& message) {
  static constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};
  const nlohmann::ordered_json* reasoning = nullptr;
  for (const char* field : kReasoningFields) {
    auto it = message.find(field);
    if (it != message.end() && !it->is_null()) {
      reasoning = &*it;
      break;
    }
  }
  if (reasoning == nullptr) return message;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  out["thinking"] = *reasoning;
  for (const auto& [key, value] : message.items()) out[key] = value;
  out["reasoning_content"] = *reasoning;
  return out;
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::compile(std::string source) {
  auto compiled = jinja::Template::compile(source);
  if (!compiled.ok()) {
    return invalid_argument("chat template does not parse: " + compiled.status().message());
  }
  return ChatTemplate(std::make_shared<const std::string>(std::move(source)),
                      std::make_shared<const jinja::Template>(std::move(compiled).value()));
}

StatusOr<std::string> ChatTemplate::render(const ChatTemplateInputs& inputs) const {
  if (!inputs.messages.is_array()) return invalid_argument("messages must be an array");
  if (!inputs.extra_kwargs.is_object())
    return invalid_argument("chat template kwargs must be an object");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const auto& message : inputs.messages) {
    if (!message.is_object()) return invalid_argument("each message must be an object");
    messages.push_back(alias_reasoning(message));
  }
  std::vector<std::pair<std::string, Value>> variables;
  for (const auto& [key, value] : inputs.extra_kwargs.items()) {
    variables.emplace_back(key, jinja::value_from_json(value));
  }
  variables.emplace_back("messages", jinja::value_from_json(messages));
  variables.emplace_back(
      "tools", inputs.tools ? jinja::value_from_json(*inputs.tools) : Value(Value::None{}));
  variables.emplace_back("documents", Value(Value::None{}));
  variables.emplace_back("add_generation_prompt", Value(inputs.add_generation_prompt));
  variables.emplace_back("bos_token", Value(inputs.bos_token));
  variables.emplace_back("eos_token", Value(inputs.eos_token));
  jinja::RenderOptions options;
  options.now = inputs.now;
  auto rendered = compiled_->render(std::move(variables), options);
  if (!rendered.ok()) {
    return Status(rendered.status().code(), "chat template error: " + rendered.status().message());
  }
  return rendered;
}

StatusOr<ChatTemplate> load_chat_template_file(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string source, read_text_file(path));
  auto compiled = ChatTemplate::compile(std::move(source));
  if (!compiled.ok()) return invalid_argument(path + ": " + compiled.status().message());
  return compiled;
}

}  // namespace pagoda
