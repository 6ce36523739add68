// How a model family writes tool calls into its output text, for `tool_choice: "auto"`
// (vLLM's --tool-call-parser): where the calls start, how much text before them is safely
// content while tokens still arrive, and the calls themselves. One file per family.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::tools {

/// One call as OpenAI's `tool_calls[].function` carries it.
struct ToolCall {
  std::string name;
  std::string arguments;  ///< a JSON object's text
  bool operator==(const ToolCall&) const = default;
};

class ToolCallFormat {
 public:
  virtual ~ToolCallFormat() = default;

  /// Where the calls begin in the output so far; npos while none has begun. No call begins
  /// before `from` (a stream passes what it has already sent as content, so it never searches
  /// the same text twice).
  virtual std::size_t calls_start(std::string_view text, std::size_t from) const = 0;

  /// With no calls begun, how much of `text` is content whatever comes next: all but a tail that
  /// could still grow into the start of a call.
  virtual std::size_t content_safe_length(std::string_view text) const = 0;

  struct Calls {
    std::vector<ToolCall> calls;
    /// How much of the region those calls took: parsing may resume there (a stream does, so
    /// each call is scanned once it has closed, not again with every token after it).
    std::size_t consumed = 0;
  };

  /// The calls in `region` (the output from calls_start on, or from an earlier `consumed`).
  /// `final` false: the output may go on, so only calls already closed are returned. nullopt
  /// when the region is malformed (then the whole output is content, as in vLLM).
  virtual std::optional<Calls> parse_calls(std::string_view region, bool final) const = 0;
};

/// The --tool-call-parser names: "hermes" (also Qwen 2.5 / Qwen 3), "llama3_json", "mistral".
StatusOr<std::unique_ptr<ToolCallFormat>> make_tool_call_format(std::string_view name);

/// The names make_tool_call_format accepts, for help and error texts.
const std::vector<std::string>& tool_call_format_names();

std::unique_ptr<ToolCallFormat> make_hermes_format();
std::unique_ptr<ToolCallFormat> make_llama3_json_format();
std::unique_ptr<ToolCallFormat> make_mistral_format();

}  // namespace pagoda::tools
