// Mistral: "[TOOL_CALLS]" then either a JSON array of {"name", "arguments"} objects (tokenizers
// before v11) or, from v11, "name[ARGS]{...}" with "[TOOL_CALLS]" before each further call. Text
// before the first marker is content.
#include <string_view>

#include "tools/json_scan.h"
#include "tools/marker.h"
#include "tools/tool_call_format.h"
#include "tools/tool_call_json.h"

namespace pagoda::tools {

namespace {

constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";

std::string_view trim(std::string_view s) {
  const std::size_t first = skip_json_space(s, 0);
  std::size_t last = s.size();
  while (last > first && (s[last - 1] == ' ' || s[last - 1] == '\n' || s[last - 1] == '\t' ||
                          s[last - 1] == '\r')) {
    --last;
  }
  return s.substr(first, last - first);
}

// The calls of a "[...]" array, each element one call object.
std::optional<std::vector<ToolCall>> calls_in_array(std::string_view array) {
  std::vector<ToolCall> calls;
  std::size_t pos = skip_json_space(array, 1);
  while (pos < array.size() && array[pos] != ']') {
    const std::size_t end = json_container_end(array, pos);
    if (end == std::string_view::npos) return std::nullopt;
    std::optional<ToolCall> call = tool_call_from_json(array.substr(pos, end - pos));
    if (!call) return std::nullopt;
    calls.push_back(std::move(*call));
    pos = skip_json_space(array, end);
    if (pos < array.size() && array[pos] == ',') pos = skip_json_space(array, pos + 1);
  }
  return calls;
}

class MistralFormat final : public ToolCallFormat {
 public:
  std::size_t calls_start(std::string_view text, std::size_t from) const override {
    return text.find(kToolCalls, from);
  }

  std::size_t content_safe_length(std::string_view text) const override {
    return text.size() - partial_marker_suffix(text, kToolCalls);
  }

  std::optional<Calls> parse_calls(std::string_view region, bool final) const override {
    Calls out;
    std::size_t pos = region.find(kToolCalls);
    while (pos != std::string_view::npos) {
      pos = skip_json_space(region, pos + kToolCalls.size());
      if (pos == region.size()) break;
      std::size_t next = 0;
      if (region[pos] == '[') {
        const std::size_t end = json_container_end(region, pos);
        if (end == std::string_view::npos) {
          if (final) return std::nullopt;
          break;
        }
        std::optional<std::vector<ToolCall>> array = calls_in_array(region.substr(pos, end - pos));
        if (!array) return std::nullopt;
        out.calls.insert(out.calls.end(), array->begin(), array->end());
        next = end;
      } else {
        const std::size_t args = region.find(kArgs, pos);
        if (args == std::string_view::npos) {
          if (final) return std::nullopt;
          break;
        }
        const std::size_t body = skip_json_space(region, args + kArgs.size());
        const std::size_t end = json_container_end(region, body);
        if (end == std::string_view::npos) {
          if (final) return std::nullopt;
          break;
        }
        const std::string_view name = trim(region.substr(pos, args - pos));
        std::optional<std::string> arguments = arguments_from_json(region.substr(body, end - body));
        if (name.empty() || !arguments) return std::nullopt;
        out.calls.push_back({std::string(name), std::move(*arguments)});
        next = end;
      }
      out.consumed = next;
      pos = region.find(kToolCalls, next);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_mistral_format() {
  return std::make_unique<MistralFormat>();
}

}  // namespace pagoda::tools
