// libFuzzer target for the tool-call parsers (the model's output, which random weights or a
// prompt injection make arbitrary): the first byte picks the format and how the text is cut into
// streamed pieces, the rest is the output. Parsing it whole and streaming it must never crash,
// and the stream must send every byte of content and every call at most once: its content is
// never longer than the text, and it sends no more calls than the text holds openings of a call.
// Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tools/tool_call_format.h"
#include "tools/tool_call_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda::tools;
  if (size == 0) return 0;
  const auto& names = tool_call_format_names();
  auto format = make_tool_call_format(names[data[0] % names.size()]);
  if (!format.ok()) std::abort();
  const std::size_t piece = 1 + (data[0] >> 2);  // 1..64 bytes a step
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  const ToolOutput whole = parse_tool_output(**format, text);
  if (whole.content.size() > text.size()) std::abort();

  ToolCallStream stream(**format);
  std::string content;
  std::size_t calls = 0;
  auto take = [&](const ToolStreamStep& step) {
    content += step.content;
    for (const ToolCallDelta& delta : step.calls) {
      if (delta.index != calls) std::abort();  // indices count up from 0, each sent once
      ++calls;
    }
  };
  for (std::size_t at = 0; at < text.size(); at += piece) take(stream.feed(text.substr(at, piece)));
  take(stream.finish());
  if (content.size() > text.size()) std::abort();
  if (stream.sent_calls() != (calls > 0)) std::abort();
  return 0;
}
