// Chat templates: a model's Jinja template compiled once, then rendered for each conversation the
// way transformers' apply_chat_template renders it, byte for byte.
#pragma once

#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "pagoda/status.h"

namespace pagoda {

namespace jinja {
class Template;
}

/// What one render sees. JSON is ordered so that tojson prints keys in the order they arrived.
struct ChatTemplateInputs {
  /// Array of message objects (role, content as a string or a list of parts, tool_calls, ...).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  /// Tool definitions; the template sees None when absent.
  std::optional<nlohmann::ordered_json> tools;
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  /// Extra template variables such as enable_thinking; must be an object.
  nlohmann::ordered_json extra_kwargs = nlohmann::ordered_json::object();
  /// The instant strftime_now() formats; the local time when unset (tests pin it).
  std::optional<std::tm> now;
};

/// A compiled chat template; render() is const and safe to call from many threads.
class ChatTemplate {
 public:
  /// Parses the template; INVALID_ARGUMENT with the template line on a syntax error.
  static StatusOr<ChatTemplate> compile(std::string source);

  /// Renders a conversation; template errors, raise_exception() and sandbox limits are statuses.
  StatusOr<std::string> render(const ChatTemplateInputs& inputs) const;

  /// The template text as given.
  const std::string& source() const { return *source_; }

 private:
  ChatTemplate(std::shared_ptr<const std::string> source,
               std::shared_ptr<const jinja::Template> compiled)
      : source_(std::move(source)), compiled_(std::move(compiled)) {}

  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Template> compiled_;
};

/// Reads and compiles a template file (`--chat-template FILE`).
StatusOr<ChatTemplate> load_chat_template_file(const std::string& path);

}  // namespace pagoda
