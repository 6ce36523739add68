#include "api/chat_prompt.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "api/request_fields.h"

namespace pagoda::api {

namespace {

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};

// Content as the template sees it: a string. Text parts are joined with newlines, as vLLM does
// for templates that expect string content.
std::optional<std::string> read_content(const std::string& where, bool may_be_absent,
                                        RequestFields& fields) {
  const Json* content = fields.find("content");
  if (content == nullptr) {
    if (!may_be_absent) fields.fail("content", "'" + where + "content' is required");
    return std::string();
  }
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) {
    fields.fail("content", "'" + where +
                               "content' must be a string or a list of content parts, "
                               "got " +
                               json_type_name(*content));
    return {};
  }
  std::string text;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    const std::string part_where = "content[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      fields.fail(part_where,
                  "'" + where + part_where + "' must be an object, got " + json_type_name(part));
      return {};
    }
    RequestFields part_fields(part, where + part_where + ".");
    const std::optional<std::string> type = part_fields.string("type");
    if (!type && part_fields.ok())
      part_fields.fail("type", "'" + where + part_where + ".type' is required");
    if (type && *type != "text") {
      part_fields.fail("type", "'" + where + part_where + ".type' is \"" + *type +
                                   "\"; this model takes only \"text\" content parts");
    }
    const std::optional<std::string> part_text = part_fields.string("text");
    if (!part_text && part_fields.ok()) {
      part_fields.fail("text", "'" + where + part_where + ".text' is required");
    }
    if (!part_fields.ok()) {
      fields.fail(*part_fields.error());
      return {};
    }
    if (i > 0) text += '\n';
    text += *part_text;
  }
  return text;
}

// OpenAI sends tool-call arguments as a JSON string; chat templates expect the object.
std::optional<Json> read_tool_calls(const Json& calls, const std::string& where,
                                    RequestFields& fields) {
  Json out = Json::array();
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::string call_where = where + "tool_calls[" + std::to_string(i) + "]";
    const Json& call = calls[i];
    const Json* function =
        call.is_object() && call.contains("function") ? &call["function"] : nullptr;
    if (function == nullptr || !function->is_object() || !function->contains("name") ||
        !(*function)["name"].is_string()) {
      fields.fail(ApiError::invalid_request(
          "'" + call_where +
              "' must be {\"type\": \"function\", \"function\": {\"name\": ..., "
              "\"arguments\": ...}}",
          call_where));
      return {};
    }
    Json normalized = call;
    const auto arguments = function->find("arguments");
    if (arguments != function->end() && arguments->is_string()) {
      const std::string& text = arguments->get_ref<const std::string&>();
      Json parsed = text.empty() ? Json::object() : Json::parse(text, nullptr, false);
      if (parsed.is_discarded()) {
        fields.fail(
            ApiError::invalid_request("'" + call_where + ".function.arguments' is not valid JSON",
                                      call_where + ".function.arguments"));
        return {};
      }
      normalized["function"]["arguments"] = std::move(parsed);
    }
    out.push_back(std::move(normalized));
  }
  return out;
}

std::optional<Json> read_message(const Json& message, std::size_t index, RequestFields& body) {
  const std::string where = "messages[" + std::to_string(index) + "].";
  if (!message.is_object()) {
    body.fail(ApiError::invalid_request("'messages[" + std::to_string(index) +
                                            "]' must be an object, got " + json_type_name(message),
                                        "messages[" + std::to_string(index) + "]"));
    return {};
  }
  RequestFields fields(message, where);
  std::optional<std::string> role = fields.string("role");
  if (!role && fields.ok()) fields.fail("role", "'" + where + "role' is required");
  if (role && std::find(kRoles.begin(), kRoles.end(), *role) == kRoles.end()) {
    fields.fail("role", "'" + where + "role' is \"" + *role +
                            "\"; expected one of system, developer, user, assistant, tool");
  }
  if (!fields.ok()) {
    body.fail(*fields.error());
    return {};
  }
  const bool is_assistant = *role == "assistant";
  std::optional<std::string> content = read_content(where, is_assistant, fields);
  (void)fields.string("name");
  (void)fields.string("tool_call_id");
  const Json* tool_calls = fields.array("tool_calls");
  if (tool_calls != nullptr && !is_assistant) {
    fields.fail("tool_calls", "'" + where + "tool_calls' is only allowed on assistant messages");
  }
  std::optional<Json> calls;
  if (tool_calls != nullptr && fields.ok()) calls = read_tool_calls(*tool_calls, where, fields);
  if (!fields.ok()) {
    body.fail(*fields.error());
    return {};
  }
  Json out = message;
  // "developer" is OpenAI's newer name for the system role; templates know "system".
  if (*role == "developer") out["role"] = "system";
  out["content"] = std::move(*content);
  if (calls) out["tool_calls"] = std::move(*calls);
  return out;
}

// The rendered text up to the end of the final message, so generation continues it.
std::optional<std::string> cut_after_final_message(const std::string& rendered,
                                                   const std::string& content) {
  if (content.empty()) return {};
  const std::size_t at = rendered.rfind(content);
  if (at == std::string::npos) return {};
  return rendered.substr(0, at + content.size());
}

}  // namespace

ApiErrorOr<std::string> render_chat_prompt(const Json& body, const ServedModel& model) {
  RequestFields fields(body);
  const Json* messages = fields.find("messages");
  if (messages == nullptr) {
    return ApiError::invalid_request("'messages' is required", "messages");
  }
  if (!messages->is_array()) {
    return ApiError::invalid_request(
        "'messages' must be a list of messages, got " + json_type_name(*messages), "messages");
  }
  if (messages->empty()) {
    return ApiError::invalid_request("'messages' must hold at least one message", "messages");
  }
  ChatTemplateInputs inputs;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    std::optional<Json> message = read_message((*messages)[i], i, fields);
    if (!message) return *fields.error();
    inputs.messages.push_back(std::move(*message));
  }
  if (const Json* tools = fields.array("tools")) {
    for (std::size_t i = 0; i < tools->size(); ++i) {
      if (!(*tools)[i].is_object()) {
        const std::string where = "tools[" + std::to_string(i) + "]";
        fields.fail(ApiError::invalid_request("'" + where + "' must be an object", where));
      }
    }
    inputs.tools = *tools;
  }
  if (const Json* kwargs = fields.object("chat_template_kwargs")) inputs.extra_kwargs = *kwargs;
  const bool continue_final = fields.boolean("continue_final_message").value_or(false);
  inputs.add_generation_prompt = fields.boolean("add_generation_prompt").value_or(!continue_final);
  if (fields.find("chat_template") != nullptr) {
    fields.fail("chat_template",
                "per-request chat templates are not accepted; start the server "
                "with --chat-template FILE instead");
  }
  if (!fields.ok()) return *fields.error();
  if (continue_final) {
    if (inputs.add_generation_prompt) {
      return ApiError::invalid_request(
          "'continue_final_message' and 'add_generation_prompt' cannot both be true",
          "continue_final_message");
    }
    if (inputs.messages.back()["role"] != "assistant") {
      return ApiError::invalid_request(
          "'continue_final_message' needs the last message to be an assistant message",
          "continue_final_message");
    }
  }
  if (!model.chat_template) {
    return ApiError::invalid_request(
        "the model has no chat template, so chat completions are not available; start the "
        "server with --chat-template FILE or use /v1/completions",
        "messages");
  }
  inputs.bos_token = model.bos_token;
  inputs.eos_token = model.eos_token;
  StatusOr<std::string> rendered = model.chat_template->render(inputs);
  if (!rendered.ok()) {
    return ApiError::invalid_request(
        "the chat template could not render these messages: " + rendered.status().message(),
        "messages");
  }
  if (!continue_final) return std::move(*rendered);
  const std::string& last = inputs.messages.back()["content"].get_ref<const std::string&>();
  std::optional<std::string> cut = cut_after_final_message(*rendered, last);
  if (!cut) {
    return ApiError::invalid_request(
        "'continue_final_message': the final assistant message is empty or not found verbatim "
        "in the rendered chat",
        "continue_final_message");
  }
  return std::move(*cut);
}

}  // namespace pagoda::api
