// Tool calls out of a model's output for `tool_choice: "auto"`, finished or as tokens arrive.
//
// Streaming, the text before the calls goes out as content as soon as it cannot be the start of
// a call (a half-arrived "<tool_call>" is held back), and each call goes out whole, name and
// arguments in one delta, once it has closed; OpenAI clients join the deltas of a call by its
// index. If the calls turn out malformed, what was held back goes out as content at the end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tools/tool_call_format.h"

namespace pagoda::tools {

struct ToolOutput {
  std::string content;  ///< the text outside the calls
  std::vector<ToolCall> calls;
};

/// A finished output split into content and calls; no calls (and all of it content) when it has
/// none or they are malformed.
ToolOutput parse_tool_output(const ToolCallFormat& format, std::string_view text);

struct ToolCallDelta {
  std::size_t index = 0;  ///< the call's position among the output's calls
  ToolCall call;
  bool operator==(const ToolCallDelta&) const = default;
};

struct ToolStreamStep {
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class ToolCallStream {
 public:
  explicit ToolCallStream(const ToolCallFormat& format) : format_(format) {}

  /// `text` appended to the output: what can go out now.
  ToolStreamStep feed(std::string_view text);
  /// The output ended: everything still held back.
  ToolStreamStep finish();
  /// Whether any call went out (finish_reason "tool_calls").
  bool sent_calls() const { return calls_sent_ > 0; }

 private:
  const ToolCallFormat& format_;
  std::string text_;
  std::size_t content_sent_ = 0;  // bytes of text_ sent as content
  std::size_t calls_start_ = std::string::npos;
  std::size_t parsed_to_ = 0;  // text_ offset past the last call sent
  std::size_t calls_sent_ = 0;
};

}  // namespace pagoda::tools
