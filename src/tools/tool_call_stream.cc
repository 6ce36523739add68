#include "tools/tool_call_stream.h"

namespace pagoda::tools {

ToolOutput parse_tool_output(const ToolCallFormat& format, std::string_view text) {
  const std::size_t start = format.calls_start(text, 0);
  if (start == std::string_view::npos) return {std::string(text), {}};
  std::optional<ToolCallFormat::Calls> calls = format.parse_calls(text.substr(start), true);
  if (!calls || calls->calls.empty()) return {std::string(text), {}};
  return {std::string(text.substr(0, start)), std::move(calls->calls)};
}

ToolStreamStep ToolCallStream::feed(std::string_view text) {
  text_.append(text);
  ToolStreamStep step;
  if (calls_start_ == std::string::npos) {
    const std::size_t start = format_.calls_start(text_, content_sent_);
    const std::size_t safe =
        start != std::string::npos ? start : format_.content_safe_length(text_);
    if (safe > content_sent_) {
      step.content = text_.substr(content_sent_, safe - content_sent_);
      content_sent_ = safe;
    }
    if (start == std::string::npos) return step;
    calls_start_ = parsed_to_ = start;
  }
  // A call can only have closed if the new text holds a closing character of some format.
  if (text.find_first_of("}]>") == std::string_view::npos) return step;
  std::optional<ToolCallFormat::Calls> calls =
      format_.parse_calls(std::string_view(text_).substr(parsed_to_), false);
  if (!calls) return step;  // malformed: finish() sends the held text as content
  for (ToolCall& call : calls->calls) step.calls.push_back({calls_sent_++, std::move(call)});
  parsed_to_ += calls->consumed;
  return step;
}

ToolStreamStep ToolCallStream::finish() {
  ToolStreamStep step;
  if (calls_start_ == std::string::npos) {
    step.content = text_.substr(content_sent_);
    content_sent_ = text_.size();
    return step;
  }
  std::optional<ToolCallFormat::Calls> calls =
      format_.parse_calls(std::string_view(text_).substr(parsed_to_), true);
  if (calls) {
    for (ToolCall& call : calls->calls) step.calls.push_back({calls_sent_++, std::move(call)});
  }
  // Nothing parsed as a call: the whole held region was text after all.
  if (calls_sent_ == 0) step.content = text_.substr(content_sent_);
  content_sent_ = text_.size();
  return step;
}

}  // namespace pagoda::tools
