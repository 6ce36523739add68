// Bridges between template values and JSON: input conversion from nlohmann::ordered_json (key
// order kept, as Python dicts keep it) and Python's json.dumps() for the tojson filter.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "template/jinja/value.h"

namespace pagoda::jinja {

/// Converts parsed JSON to a template value; object keys keep their order.
Value value_from_json(const nlohmann::ordered_json& json);

/// json.dumps() options that transformers' tojson filter exposes.
struct JsonDumpOptions {
  /// Newline-and-indent text per level; no newlines when unset.
  std::optional<std::string> indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

/// Python's json.dumps(value, ...); undefined values and callables are errors, as in Python.
StatusOr<std::string> dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace pagoda::jinja
