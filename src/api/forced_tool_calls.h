// tool_choice "required" or a named function: the calls are forced by a grammar, and the
// constrained output becomes the message's tool_calls (finish_reason "tool_calls").
//
//   named   {"type": "function", "function": {"name": "f"}}
//           output = f's arguments, an instance of f's `parameters` schema
//           -> tool_calls [{id, type: "function", function: {name: "f", arguments: output}}]
//   required
//           output = [{"name": "f", "arguments": {...}}, ...]: at least one call, each the
//           name of a given tool and its arguments (one call when parallel_tool_calls is false)
//           -> one tool call per element
//
// "none" and "auto" force nothing (auto's calls come back as the model's text: no tool-call
// parser yet).
#pragma once

#include <optional>
#include <string>

#include "api/api_error.h"
#include "api/request_fields.h"
#include "structured/constraint_spec.h"

namespace pagoda::api {

/// How a forced output becomes tool calls (ResponseOptions::tool_calls).
struct ToolCallFormat {
  /// Set for a named function: the output is its arguments. Unset: a list of calls.
  std::optional<std::string> function_name;
};

/// A forced tool call request: the constraint to compile and how to read its output.
struct ForcedToolCalls {
  structured::ConstraintSpec spec;
  ToolCallFormat format;
};

/// Reads `tools`, `tool_choice` and `parallel_tool_calls` of a chat body; nothing unless the
/// calls are forced. Errors (a malformed tool, an unknown function name, "required" without
/// tools) go to `fields`.
std::optional<ForcedToolCalls> read_forced_tool_calls(RequestFields& fields);

/// The OpenAI `tool_calls` list for a finished forced output `text`; nullopt when the text is
/// not what the grammar allows (an output cut by max_tokens). `id_prefix` makes the call ids
/// ("call_<id_prefix>_<n>").
std::optional<Json> tool_calls_json(const ToolCallFormat& format, const std::string& text,
                                    const std::string& id_prefix);

}  // namespace pagoda::api
