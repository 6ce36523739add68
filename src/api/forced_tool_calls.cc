#include "api/forced_tool_calls.h"

#include <map>
#include <vector>

namespace pagoda::api {

namespace {

struct Tool {
  std::string name;
  Json parameters;
};

// The tools of the body, checked; nullopt after an error.
std::optional<std::vector<Tool>> read_tools(RequestFields& fields) {
  std::vector<Tool> tools;
  const Json* list = fields.array("tools");
  if (list == nullptr) return tools;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string param = "tools[" + std::to_string(i) + "]";
    const Json& tool = (*list)[i];
    const Json* function =
        tool.is_object() && tool.contains("function") ? &tool["function"] : nullptr;
    if (function == nullptr || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      fields.fail(ApiError::invalid_request(
          "'" + param + "' must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
          param));
      return std::nullopt;
    }
    Tool t{(*function)["name"].get<std::string>(), Json{{"type", "object"}}};
    if (const auto p = function->find("parameters"); p != function->end() && !p->is_null()) {
      if (!p->is_object()) {
        fields.fail(ApiError::invalid_request("'" + param +
                                                  ".function.parameters' must be a "
                                                  "JSON schema (an object)",
                                              param + ".function.parameters"));
        return std::nullopt;
      }
      t.parameters = *p;
    }
    tools.push_back(std::move(t));
  }
  return tools;
}

// The calls' schema: an array of {name, arguments}, each one of the tools. Tools' $defs move to
// the top, where their "#/$defs/..." references point.
std::optional<Json> calls_schema(RequestFields& fields, const std::vector<Tool>& tools,
                                 bool parallel) {
  Json defs = Json::object();
  Json any_of = Json::array();
  for (const Tool& tool : tools) {
    Json parameters = tool.parameters;
    for (const char* key : {"$defs", "definitions"}) {
      if (!parameters.contains(key) || !parameters[key].is_object()) continue;
      for (const auto& [name, def] : parameters[key].items()) {
        if (defs.contains(name) && defs[name] != def) {
          fields.fail("tools", "tools define '" + name +
                                   "' in their $defs differently; "
                                   "rename one to force calls among them");
          return std::nullopt;
        }
        defs[name] = def;
      }
      parameters.erase(key);
    }
    any_of.push_back({{"type", "object"},
                      {"properties", {{"name", {{"const", tool.name}}}, {"arguments", parameters}}},
                      {"required", {"name", "arguments"}},
                      {"additionalProperties", false}});
  }
  Json schema = {{"type", "array"}, {"items", {{"anyOf", std::move(any_of)}}}, {"minItems", 1}};
  if (!parallel) schema["maxItems"] = 1;
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema;
}

}  // namespace

std::optional<ForcedToolCalls> read_forced_tool_calls(RequestFields& fields) {
  const Json* choice = fields.find("tool_choice");
  const std::optional<bool> parallel = fields.boolean("parallel_tool_calls");
  std::optional<std::vector<Tool>> tools = read_tools(fields);
  if (!tools || choice == nullptr) return std::nullopt;
  if (choice->is_string() && (*choice == "none" || *choice == "auto")) return std::nullopt;
  if (choice->is_string() && *choice == "required") {
    if (tools->empty()) {
      fields.fail("tool_choice", "'tool_choice' \"required\" needs at least one tool in 'tools'");
      return std::nullopt;
    }
    std::optional<Json> schema = calls_schema(fields, *tools, parallel.value_or(true));
    if (!schema) return std::nullopt;
    return ForcedToolCalls{
        {.kind = structured::ConstraintKind::kJsonSchema, .text = schema->dump()}, {}};
  }
  const Json* function =
      choice->is_object() && choice->contains("function") && (*choice)["function"].is_object()
          ? &(*choice)["function"]
          : nullptr;
  if (function == nullptr || !function->contains("name") || !(*function)["name"].is_string()) {
    fields.fail("tool_choice",
                "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": "
                "\"function\", \"function\": {\"name\": ...}}");
    return std::nullopt;
  }
  const std::string name = (*function)["name"].get<std::string>();
  for (const Tool& tool : *tools) {
    if (tool.name == name) {
      return ForcedToolCalls{
          {.kind = structured::ConstraintKind::kJsonSchema, .text = tool.parameters.dump()},
          {.function_name = name}};
    }
  }
  fields.fail("tool_choice", "'tool_choice' names function '" + name + "', which 'tools' lacks");
  return std::nullopt;
}

std::optional<Json> tool_calls_json(const ToolCallFormat& format, const std::string& text,
                                    const std::string& id_prefix) {
  auto call = [&](std::size_t n, const std::string& name, std::string arguments) {
    return Json{{"id", "call_" + id_prefix + "_" + std::to_string(n)},
                {"type", "function"},
                {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
  };
  if (format.function_name) {
    if (!Json::accept(text)) return std::nullopt;
    return Json::array({call(0, *format.function_name, text)});
  }
  const Json calls = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (calls.is_discarded() || !calls.is_array() || calls.empty()) return std::nullopt;
  Json out = Json::array();
  for (const Json& c : calls) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string() ||
        !c.contains("arguments")) {
      return std::nullopt;
    }
    out.push_back(call(out.size(), c["name"].get<std::string>(), c["arguments"].dump()));
  }
  return out;
}

}  // namespace pagoda::api
