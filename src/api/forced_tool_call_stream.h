// Forced tool calls (tool_choice "required" or named) as their output arrives, piece by piece,
// as OpenAI streams them: a call's id and name first, then its arguments in fragments.
//
//   named "f":  output = f's arguments               {"city": "Os  lo"}
//               -> [call 0: name f] [call 0: args '{"city": "Os'] [call 0: args 'lo"}']
//   required:   output = [{"name": "f", "arguments": {...}}, {"name": "g", ...}]
//               -> [call 0: name f] [call 0: args ...]... [call 1: name g] [call 1: args ...]
//
// The grammar writes each call's "name" before its "arguments" (the schema's order), so a
// call's header always goes out before its arguments; arguments seen before their name wait.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/forced_tool_calls.h"

namespace pagoda::api {

/// What one stretch of output adds to one call.
struct ForcedToolCallDelta {
  std::size_t index = 0;            ///< the call's position in the output
  std::optional<std::string> name;  ///< set once per call, in its first delta
  std::string arguments;            ///< the next fragment of its arguments' JSON text
  bool operator==(const ForcedToolCallDelta&) const = default;
};

/// Reads a forced output as it grows. Not thread-safe.
class ForcedToolCallStream {
 public:
  explicit ForcedToolCallStream(ToolCallFormat format);

  /// `text` appended to the output: the calls' new parts, in call order (one delta per call
  /// touched).
  std::vector<ForcedToolCallDelta> feed(std::string_view text);
  /// Whether any call's name has gone out.
  bool started() const { return num_named_ > 0; }

 private:
  enum class State {
    kBeforeList,    // required: before '['
    kBetweenCalls,  // required: before a call's '{', a ',' or the closing ']'
    kBeforeKey,     // inside a call object: before a key, a ',' or the closing '}'
    kKey,           // inside a key string
    kBeforeValue,   // after a key: before ':' and the value
    kName,          // inside the name's string
    kValue,         // inside a value (the arguments, or one to skip)
    kDone,          // past the list (or anything unexpected: nothing more is read)
  };

  void step(char c, std::vector<ForcedToolCallDelta>& out);
  // The delta for call `index` in `out`, added when the last one is for another call.
  ForcedToolCallDelta& delta_for(std::size_t index, std::vector<ForcedToolCallDelta>& out);
  void emit_arguments(std::string_view fragment, std::vector<ForcedToolCallDelta>& out);
  // A JSON value scanner's step; true when `c` ends the value (and is part of it) or, for a
  // number or literal, when `c` comes after it (`c` is then not part of it: *consumed false).
  bool value_step(char c, bool& consumed);

  const ToolCallFormat format_;
  State state_;
  std::size_t num_named_ = 0;  // calls whose name has gone out
  std::size_t call_ = 0;       // the call being read
  std::string token_;          // the key or name being read (raw JSON string, quotes included)
  bool escaped_ = false;       // the last character in a string was a lone backslash
  std::string key_;            // the key whose value comes next
  bool in_arguments_ = false;  // the value being read is the call's arguments
  std::string held_;           // arguments read before the call's name
  // The value being scanned.
  int depth_ = 0;
  bool in_string_ = false;
  bool scalar_ = false;  // a number or literal (ends at the first character after it)
  bool started_value_ = false;
};

}  // namespace pagoda::api
