// Llama 3.x JSON tool calls: the whole output is the calls when it begins (after whitespace) with
// "<|python_tag|>" or "{": JSON objects {"name": ..., "parameters": {...}} separated by ";".
// Output that begins any other way is content (vLLM's llama3_json parser).
#include <string_view>

#include "tools/json_scan.h"
#include "tools/marker.h"
#include "tools/tool_call_format.h"
#include "tools/tool_call_json.h"

namespace pagoda::tools {

namespace {

constexpr std::string_view kPythonTag = "<|python_tag|>";

class Llama3JsonFormat final : public ToolCallFormat {
 public:
  // Only the output's first character decides, wherever `from` is.
  std::size_t calls_start(std::string_view text, std::size_t /*from*/) const override {
    const std::size_t first = skip_json_space(text, 0);
    if (first == text.size()) return std::string_view::npos;
    const std::string_view rest = text.substr(first);
    // The leading whitespace belongs to the calls: no content goes out before them.
    if (rest.front() == '{' || rest.starts_with(kPythonTag)) return 0;
    return std::string_view::npos;
  }

  std::size_t content_safe_length(std::string_view text) const override {
    // Undecided while the output is whitespace or a prefix of the python tag; content once it
    // has begun any other way.
    const std::size_t first = skip_json_space(text, 0);
    if (first == text.size()) return 0;
    const std::string_view rest = text.substr(first);
    if (rest.size() < kPythonTag.size() && kPythonTag.starts_with(rest)) return 0;
    return text.size();
  }

  std::optional<Calls> parse_calls(std::string_view region, bool final) const override {
    std::size_t pos = skip_json_space(region, 0);
    if (region.substr(pos).starts_with(kPythonTag)) pos += kPythonTag.size();
    Calls out;
    while (true) {
      pos = skip_json_space(region, pos);
      if (pos < region.size() && region[pos] == ';') pos = skip_json_space(region, pos + 1);
      if (pos == region.size()) break;
      const std::size_t end = json_container_end(region, pos);
      if (end == std::string_view::npos) {
        if (final) return std::nullopt;
        break;
      }
      std::optional<ToolCall> call = tool_call_from_json(region.substr(pos, end - pos));
      if (!call) return std::nullopt;
      out.calls.push_back(std::move(*call));
      out.consumed = pos = end;
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_llama3_json_format() {
  return std::make_unique<Llama3JsonFormat>();
}

}  // namespace pagoda::tools
