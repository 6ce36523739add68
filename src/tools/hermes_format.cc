// Hermes / Qwen 2.5 / Qwen 3: each call is a JSON object between <tool_call> and </tool_call>;
// text before the first call is content, text between and after calls is dropped (vLLM's
// hermes parser does the same).
#include <string_view>

#include "tools/marker.h"
#include "tools/tool_call_format.h"
#include "tools/tool_call_json.h"

namespace pagoda::tools {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

class HermesFormat final : public ToolCallFormat {
 public:
  std::size_t calls_start(std::string_view text, std::size_t from) const override {
    return text.find(kOpen, from);
  }

  std::size_t content_safe_length(std::string_view text) const override {
    return text.size() - partial_marker_suffix(text, kOpen);
  }

  std::optional<Calls> parse_calls(std::string_view region, bool final) const override {
    Calls out;
    std::size_t pos = region.find(kOpen);
    while (pos != std::string_view::npos) {
      const std::size_t body = pos + kOpen.size();
      const std::size_t close = region.find(kClose, body);
      // A call the model ended without its closing tag (stopped at EOS) still counts at the end.
      if (close == std::string_view::npos && !final) break;
      const std::string_view json = region.substr(
          body, close == std::string_view::npos ? std::string_view::npos : close - body);
      std::optional<ToolCall> call = tool_call_from_json(json);
      if (!call) return std::nullopt;
      out.calls.push_back(std::move(*call));
      out.consumed = close == std::string_view::npos ? region.size() : close + kClose.size();
      if (close == std::string_view::npos) break;
      pos = region.find(kOpen, out.consumed);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_hermes_format() {
  return std::make_unique<HermesFormat>();
}

}  // namespace pagoda::tools
