#include "structured/strict_formats.h"

#include <nlohmann/json.hpp>

namespace pagoda::structured {

namespace {

using Json = nlohmann::ordered_json;

// 0-255 without leading zeros, four times.
constexpr const char* kIpv4Pattern =
    "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
    "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$";

// Returns whether anything changed.
bool rewrite(Json& node) {
  bool changed = false;
  if (node.is_object()) {
    const auto format = node.find("format");
    if (format != node.end() && *format == "ipv4" && !node.contains("pattern")) {
      node.erase("format");
      node["pattern"] = kIpv4Pattern;
      changed = true;
    }
    for (auto& [key, value] : node.items()) changed |= rewrite(value);
  } else if (node.is_array()) {
    for (Json& item : node) changed |= rewrite(item);
  }
  return changed;
}

}  // namespace

std::string with_strict_formats(const std::string& schema) {
  if (schema.find("ipv4") == std::string::npos) return schema;
  Json json = Json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !rewrite(json)) return schema;
  return json.dump();
}

}  // namespace pagoda::structured
