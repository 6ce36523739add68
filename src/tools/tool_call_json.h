// A call written as a JSON object, {"name": ..., "arguments": {...}} (or "parameters", Llama 3's
// word), read into a ToolCall. Shared by the formats that write calls as JSON objects.
#pragma once

#include <optional>
#include <string_view>

#include "tools/tool_call_format.h"

namespace pagoda::tools {

/// nullopt unless `object_text` is one JSON object with a string "name" and object (or string:
/// some models emit the arguments already serialized) "arguments" / "parameters"; absent
/// arguments read as {}.
std::optional<ToolCall> tool_call_from_json(std::string_view object_text);

/// A call's arguments written on their own (Mistral v11's "name[ARGS]{...}"): the object's text
/// as tool_call_from_json gives it, or nullopt unless `text` is one JSON object.
std::optional<std::string> arguments_from_json(std::string_view text);

}  // namespace pagoda::tools
