#include "api/structured_output.h"

#include <vector>

#include "structured/constraint_compiler.h"

namespace pagoda::api {

namespace {

using structured::ConstraintKind;
using structured::ConstraintSpec;

// A schema given as a JSON object, or as a string holding one (vLLM takes both).
std::optional<std::string> schema_text(RequestFields& fields, const Json& value,
                                       std::string_view key) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() || value.is_boolean()) return value.dump();
  fields.fail(key, "'" + fields.param(key) + "' must be a JSON schema (an object), not " +
                       json_type_name(value));
  return std::nullopt;
}

std::optional<std::vector<std::string>> choice_list(RequestFields& fields, std::string_view key) {
  const Json* list = fields.array(key);
  if (list == nullptr) return std::nullopt;
  std::vector<std::string> choices;
  for (const Json& choice : *list) {
    if (!choice.is_string()) {
      fields.fail(key, "'" + fields.param(key) + "' must be a list of strings");
      return std::nullopt;
    }
    choices.push_back(choice.get<std::string>());
  }
  if (choices.empty()) {
    fields.fail(key, "'" + fields.param(key) + "' must hold at least one choice");
    return std::nullopt;
  }
  return choices;
}

// Reads response_format; nothing for "text" or when absent.
std::optional<StructuredOutputRequest> read_response_format(RequestFields& fields) {
  const Json* format = fields.object("response_format");
  if (format == nullptr) return std::nullopt;
  RequestFields f(*format, "response_format.");
  const std::optional<std::string> type = f.string("type");
  if (!f.ok()) {
    fields.fail(*f.error());
    return std::nullopt;
  }
  if (!type) {
    fields.fail("response_format", "'response_format' needs a 'type'");
    return std::nullopt;
  }
  if (*type == "text") return std::nullopt;
  if (*type == "json_object") {
    return StructuredOutputRequest{{.kind = ConstraintKind::kJsonObject}, "response_format"};
  }
  if (*type != "json_schema") {
    fields.fail("response_format.type",
                "'response_format' type \"" + *type +
                    "\" is not supported; use \"text\", \"json_object\" or \"json_schema\"");
    return std::nullopt;
  }
  const Json* json_schema = f.object("json_schema");
  if (json_schema == nullptr) {
    fields.fail(f.error() ? *f.error()
                          : ApiError::invalid_request("'response_format' of type \"json_schema\" "
                                                      "needs a 'json_schema' object",
                                                      "response_format.json_schema"));
    return std::nullopt;
  }
  RequestFields js(*json_schema, "response_format.json_schema.");
  const std::optional<std::string> name = js.string("name");
  // strict: OpenAI's promise that the output follows the schema, which Pagoda always keeps.
  (void)js.boolean("strict");
  std::optional<std::string> text;
  if (const Json* schema = js.find("schema")) {
    text = schema_text(js, *schema, "schema");
  } else {
    text = "{\"type\": \"object\"}";  // OpenAI: no schema means any JSON object
  }
  if (!js.ok()) {
    fields.fail(*js.error());
    return std::nullopt;
  }
  if (!name || name->empty()) {
    fields.fail("response_format.json_schema.name", "'response_format.json_schema' needs a 'name'");
    return std::nullopt;
  }
  return StructuredOutputRequest{{.kind = ConstraintKind::kJsonSchema, .text = *text},
                                 "response_format.json_schema.schema"};
}

// Reads one vLLM-style set of keys (structured_outputs' or the guided_* ones); every constraint
// found is appended to `found`.
void read_vllm_keys(RequestFields& f, const std::string& json, const std::string& regex,
                    const std::string& choice, const std::string& grammar,
                    std::vector<StructuredOutputRequest>& found) {
  if (const Json* schema = f.find(json)) {
    if (std::optional<std::string> text = schema_text(f, *schema, json)) {
      found.push_back({{.kind = ConstraintKind::kJsonSchema, .text = *text}, f.param(json)});
    }
  }
  if (std::optional<std::string> text = f.string(regex)) {
    found.push_back({{.kind = ConstraintKind::kRegex, .text = *text}, f.param(regex)});
  }
  if (std::optional<std::vector<std::string>> choices = choice_list(f, choice)) {
    found.push_back({{.kind = ConstraintKind::kChoice, .choices = *choices}, f.param(choice)});
  }
  if (std::optional<std::string> text = f.string(grammar)) {
    found.push_back({{.kind = ConstraintKind::kGrammar, .text = *text}, f.param(grammar)});
  }
}

}  // namespace

std::optional<StructuredOutputRequest> read_structured_output(RequestFields& fields) {
  std::vector<StructuredOutputRequest> found;
  if (std::optional<StructuredOutputRequest> format = read_response_format(fields)) {
    found.push_back(std::move(*format));
  }
  if (const Json* outputs = fields.object("structured_outputs")) {
    RequestFields f(*outputs, "structured_outputs.");
    read_vllm_keys(f, "json", "regex", "choice", "grammar", found);
    if (f.boolean("json_object").value_or(false)) {
      found.push_back({{.kind = ConstraintKind::kJsonObject}, f.param("json_object")});
    }
    if (f.find("structural_tag") != nullptr) {
      f.fail("structural_tag", "'structured_outputs.structural_tag' is not supported");
    }
    if (!f.ok()) fields.fail(*f.error());
  }
  read_vllm_keys(fields, "guided_json", "guided_regex", "guided_choice", "guided_grammar", found);
  if (!fields.ok()) return std::nullopt;
  if (found.size() > 1) {
    fields.fail(found[1].param, "give one structured-output constraint, not both '" +
                                    found[0].param + "' and '" + found[1].param + "'");
    return std::nullopt;
  }
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::optional<ApiError> check_structured_output(const StructuredOutputRequest& request,
                                                const ServedModel& model,
                                                const engine::EngineRequest& engine_request) {
  if (model.constraints == nullptr) {
    return ApiError::invalid_request("structured outputs are not available on this server",
                                     request.param);
  }
  if (engine_request.ignore_eos && engine_request.stop_token_ids.empty()) {
    return ApiError::invalid_request(
        "a structured output ends on EOS: 'ignore_eos' needs 'stop_token_ids' with it",
        "ignore_eos");
  }
  return std::nullopt;
}

std::optional<ApiError> attach_constraint(GenerationJob& job,
                                          const structured::CompileResult& compiled) {
  if (!compiled.ok()) {
    return ApiError::from_status(
        compiled.status(), job.constraint ? std::optional(job.constraint->param) : std::nullopt);
  }
  for (engine::EngineRequest& request : job.requests) request.constraint = *compiled;
  return std::nullopt;
}

std::optional<ApiError> compile_job_constraint(GenerationJob& job, const ServedModel& model) {
  if (!job.constraint) return std::nullopt;
  return attach_constraint(job, model.constraints->compile(job.constraint->spec));
}

}  // namespace pagoda::api
