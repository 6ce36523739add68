#include "tools/tool_call_format.h"

#include <string>

namespace pagoda::tools {

const std::vector<std::string>& tool_call_format_names() {
  static const std::vector<std::string> names = {"hermes", "llama3_json", "mistral"};
  return names;
}

StatusOr<std::unique_ptr<ToolCallFormat>> make_tool_call_format(std::string_view name) {
  if (name == "hermes") return make_hermes_format();
  if (name == "llama3_json") return make_llama3_json_format();
  if (name == "mistral") return make_mistral_format();
  std::string known;
  for (const std::string& n : tool_call_format_names()) known += (known.empty() ? "" : ", ") + n;
  return invalid_argument("unknown tool call parser \"" + std::string(name) +
                          "\"; known: " + known);
}

}  // namespace pagoda::tools
