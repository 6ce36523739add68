#include "structured/constraint_limits.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

namespace pagoda::structured {

namespace {

using Json = nlohmann::json;

std::string too_large(std::string_view what, std::int64_t got, std::int64_t limit) {
  return std::string(what) + " is " + std::to_string(got) + "; at most " + std::to_string(limit) +
         " is supported";
}

// Walks a schema document for the bounds above; first failure wins.
class SchemaWalk {
 public:
  explicit SchemaWalk(const ConstraintLimits& limits) : limits_(limits) {}

  Status walk(const Json& node, std::int64_t depth) {
    if (depth > limits_.max_schema_depth) {
      return invalid_argument("the JSON schema nests deeper than " +
                              std::to_string(limits_.max_schema_depth) + " levels");
    }
    if (node.is_array()) {
      for (const Json& item : node) PAGODA_RETURN_IF_ERROR(walk(item, depth + 1));
      return Status::ok_status();
    }
    if (!node.is_object()) return Status::ok_status();
    for (const char* key : {"maxLength", "minLength", "maxItems", "minItems", "maxProperties",
                            "minProperties", "minContains", "maxContains"}) {
      const auto it = node.find(key);
      if (it == node.end() || !it->is_number()) continue;
      const double value = it->get<double>();
      if (value > static_cast<double>(limits_.max_repetition)) {
        return invalid_argument(too_large(std::string("the JSON schema's \"") + key + "\"",
                                          static_cast<std::int64_t>(value),
                                          limits_.max_repetition));
      }
    }
    if (const auto it = node.find("enum"); it != node.end() && it->is_array()) {
      num_enum_values_ += static_cast<std::int64_t>(it->size());
      if (num_enum_values_ > limits_.max_enum_values) {
        return invalid_argument(too_large("the number of enum values in the JSON schema",
                                          num_enum_values_, limits_.max_enum_values));
      }
    }
    if (const auto it = node.find("pattern"); it != node.end() && it->is_string()) {
      PAGODA_RETURN_IF_ERROR(check_regex_repetitions(it->get<std::string>(), limits_));
    }
    for (const auto& [key, value] : node.items()) {
      PAGODA_RETURN_IF_ERROR(walk(value, depth + 1));
    }
    return Status::ok_status();
  }

  // Counted repetitions {m}, {m,} and {m,n}: each count at most max_repetition, and nested
  // counts multiply (a{100}{100} is 10000 copies).
  static Status check_regex_repetitions(std::string_view regex, const ConstraintLimits& limits) {
    std::int64_t product = 1;
    for (std::size_t i = 0; i < regex.size(); ++i) {
      if (regex[i] == '\\') {
        ++i;
        continue;
      }
      if (regex[i] != '{') continue;
      std::int64_t largest = 0;
      std::size_t j = i + 1;
      bool digits = false;
      std::int64_t value = 0;
      for (; j < regex.size() &&
             (std::isdigit(static_cast<unsigned char>(regex[j])) || regex[j] == ',');
           ++j) {
        if (regex[j] == ',') {
          largest = std::max(largest, value);
          value = 0;
          continue;
        }
        digits = true;
        value = std::min<std::int64_t>(value * 10 + (regex[j] - '0'), 1'000'000'000);
      }
      if (!digits || j >= regex.size() || regex[j] != '}') continue;
      largest = std::max(largest, value);
      if (largest > limits.max_repetition) {
        return invalid_argument(
            too_large("a counted repetition in the regex", largest, limits.max_repetition));
      }
      // Repetitions that follow one another (a{m}{n}, (x{m}){n}) multiply.
      const bool follows = i > 0 && (regex[i - 1] == '}' || regex[i - 1] == ')');
      product = follows ? product * std::max<std::int64_t>(largest, 1)
                        : std::max<std::int64_t>(largest, 1);
      if (product > limits.max_repetition * 16) {
        return invalid_argument(too_large("the product of nested counted repetitions in the regex",
                                          product, limits.max_repetition * 16));
      }
      i = j;
    }
    return Status::ok_status();
  }

 private:
  const ConstraintLimits& limits_;
  std::int64_t num_enum_values_ = 0;
};

}  // namespace

Status check_constraint_limits(const ConstraintSpec& spec, const ConstraintLimits& limits) {
  std::size_t bytes = spec.text.size();
  for (const std::string& choice : spec.choices) bytes += choice.size();
  const std::string name(constraint_kind_name(spec.kind));
  if (bytes > limits.max_spec_bytes) {
    return invalid_argument(too_large("the " + name + " constraint's size in bytes",
                                      static_cast<std::int64_t>(bytes),
                                      static_cast<std::int64_t>(limits.max_spec_bytes)));
  }
  switch (spec.kind) {
    case ConstraintKind::kJsonObject: return Status::ok_status();
    case ConstraintKind::kJsonSchema: {
      // Depth first: the parser itself must not recurse on a hostile document.
      std::int64_t depth = 0;
      bool in_string = false;
      for (std::size_t i = 0; i < spec.text.size(); ++i) {
        const char c = spec.text[i];
        if (in_string) {
          if (c == '\\') ++i;
          if (c == '"') in_string = false;
          continue;
        }
        if (c == '"') in_string = true;
        if (c == '{' || c == '[') depth += 1;
        if (c == '}' || c == ']') depth -= 1;
        if (depth > 2 * limits.max_schema_depth + 2) {
          return invalid_argument("the JSON schema nests deeper than " +
                                  std::to_string(limits.max_schema_depth) + " levels");
        }
      }
      const Json schema = Json::parse(spec.text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return invalid_argument("the JSON schema is not valid JSON");
      if (!schema.is_object() && !schema.is_boolean()) {
        return invalid_argument("the JSON schema must be an object, not " +
                                std::string(schema.type_name()));
      }
      return SchemaWalk(limits).walk(schema, 0);
    }
    case ConstraintKind::kRegex:
      if (spec.text.empty()) return invalid_argument("the regex is empty");
      return SchemaWalk::check_regex_repetitions(spec.text, limits);
    case ConstraintKind::kChoice:
      if (spec.choices.empty()) return invalid_argument("the choice list is empty");
      if (static_cast<std::int64_t>(spec.choices.size()) > limits.max_enum_values) {
        return invalid_argument(too_large("the number of choices",
                                          static_cast<std::int64_t>(spec.choices.size()),
                                          limits.max_enum_values));
      }
      return Status::ok_status();
    case ConstraintKind::kGrammar:
      if (spec.text.empty()) return invalid_argument("the grammar is empty");
      return Status::ok_status();
  }
  return Status::ok_status();
}

}  // namespace pagoda::structured
