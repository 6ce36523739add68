#include "tools/tool_call_json.h"

#include <nlohmann/json.hpp>

namespace pagoda::tools {

std::optional<ToolCall> tool_call_from_json(std::string_view object_text) {
  // ordered_json keeps the model's key order in the arguments it hands back.
  const nlohmann::ordered_json call =
      nlohmann::ordered_json::parse(object_text, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object()) return std::nullopt;
  const auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  ToolCall out{name->get<std::string>(), "{}"};
  if (arguments == call.end()) return out;
  if (arguments->is_object()) {
    out.arguments = arguments->dump();
  } else if (arguments->is_string()) {
    out.arguments = arguments->get<std::string>();
  } else {
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> arguments_from_json(std::string_view text) {
  const nlohmann::ordered_json arguments =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object()) return std::nullopt;
  return arguments.dump();
}

}  // namespace pagoda::tools
