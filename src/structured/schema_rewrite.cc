#include "structured/schema_rewrite.h"

#include <nlohmann/json.hpp>

namespace pagoda::structured {

namespace {

using Json = nlohmann::ordered_json;

// 0-255 without leading zeros, four times.
constexpr const char* kIpv4Pattern =
    "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
    "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$";

// A whole, non-negative JSON number, or -1.
long long bound(const Json& node, const char* key) {
  const auto it = node.find(key);
  if (it == node.end() || !it->is_number()) return -1;
  const double value = it->get<double>();
  if (value < 0 || value != static_cast<double>(static_cast<long long>(value))) return -1;
  return static_cast<long long>(value);
}

// Each counted pattern costs its maximum + 1 precomputed states at compile time (a token mask
// over the whole vocabulary each: ~2-5 ms on a 2-core machine), so only the first strings of a
// schema, up to this many states in all, are rewritten; the rest keep xgrammar's run-time
// budget. A schema with a few bounded strings pays ~1 s more compile at most and gets cheap
// masks; one with hundreds of them stays within the compile timeout.
constexpr long long kMaxPatternStates = 256;

// Returns whether anything changed; `states` counts the patterns' states so far.
bool rewrite(Json& node, long long& states) {
  bool changed = false;
  if (node.is_object()) {
    const bool string_type = node.contains("type") && node["type"] == "string";
    const bool free_form =
        !node.contains("pattern") && !node.contains("enum") && !node.contains("const");
    if (free_form && node.contains("format") && node["format"] == "ipv4") {
      node.erase("format");
      node["pattern"] = kIpv4Pattern;
      changed = true;
    } else if (string_type && free_form && !node.contains("format")) {
      const long long max_length = bound(node, "maxLength");
      const long long min_length = bound(node, "minLength");
      if (max_length >= 0 && min_length <= max_length &&
          states + max_length + 1 <= kMaxPatternStates) {
        states += max_length + 1;
        // Any character but the quote, the backslash and control characters, so the JSON text
        // and the string's value are the same characters and the count is the value's length.
        node["pattern"] = "^[^\"\\\\\\x00-\\x1f]{" + std::to_string(std::max(0LL, min_length)) +
                          "," + std::to_string(max_length) + "}$";
        node.erase("maxLength");
        node.erase("minLength");
        changed = true;
      }
    }
    for (auto& [key, value] : node.items()) changed |= rewrite(value, states);
  } else if (node.is_array()) {
    for (Json& item : node) changed |= rewrite(item, states);
  }
  return changed;
}

}  // namespace

std::string rewrite_schema(const std::string& schema) {
  if (schema.find("ipv4") == std::string::npos && schema.find("maxLength") == std::string::npos) {
    return schema;
  }
  Json json = Json::parse(schema, nullptr, /*allow_exceptions=*/false);
  long long states = 0;
  if (json.is_discarded() || !rewrite(json, states)) return schema;
  return json.dump();
}

}  // namespace pagoda::structured
