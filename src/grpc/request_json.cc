#include "grpc/request_json.h"

#include <algorithm>
#include <string>
#include <vector>

namespace pagoda::grpc {

namespace {

using api::Json;

Json value_json(const google::protobuf::Value& value);

// Adds a key the object does not have yet. ordered_json's operator[] and emplace look the key
// up first, in time linear in the object's size, so filling a large map with them would take
// quadratic time; protobuf map keys are unique already.
void append_new_key(Json& object, std::string key, Json value) {
  Json::object_t::Container& entries = object.get_ref<Json::object_t&>();
  entries.emplace_back(std::move(key), std::move(value));
}

// A repeated field as a JSON array (nlohmann takes ranges only through std containers).
template <typename Repeated>
Json json_array(const Repeated& values) {
  Json out = Json::array();
  for (const auto& value : values) out.push_back(value);
  return out;
}

// Keys in sorted order: a protobuf map has no order (its iteration order may differ between
// processes), and templates that print tools must render the same prompt every time.
Json struct_json(const google::protobuf::Struct& object) {
  std::vector<const std::string*> keys;
  for (const auto& [key, value] : object.fields()) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(), [](const auto* a, const auto* b) { return *a < *b; });
  Json out = Json::object();
  for (const std::string* key : keys) {
    append_new_key(out, *key, value_json(object.fields().at(*key)));
  }
  return out;
}

Json value_json(const google::protobuf::Value& value) {
  switch (value.kind_case()) {
    case google::protobuf::Value::kNumberValue: return value.number_value();
    case google::protobuf::Value::kStringValue: return value.string_value();
    case google::protobuf::Value::kBoolValue: return value.bool_value();
    case google::protobuf::Value::kStructValue: return struct_json(value.struct_value());
    case google::protobuf::Value::kListValue: {
      Json list = Json::array();
      for (const auto& item : value.list_value().values()) list.push_back(value_json(item));
      return list;
    }
    case google::protobuf::Value::kNullValue:
    case google::protobuf::Value::KIND_NOT_SET: break;
  }
  return nullptr;
}

Json message_json(const v1::ChatMessage& message) {
  Json out = {{"role", message.role()}, {"content", message.content()}};
  if (message.has_name()) out["name"] = message.name();
  if (message.has_tool_call_id()) out["tool_call_id"] = message.tool_call_id();
  if (message.tool_calls_size() > 0) {
    Json calls = Json::array();
    for (const v1::ToolCall& call : message.tool_calls()) {
      calls.push_back(
          {{"id", call.id()},
           {"type", "function"},
           {"function",
            {{"name", call.function_name()}, {"arguments", call.function_arguments()}}}});
    }
    out["tool_calls"] = std::move(calls);
  }
  return out;
}

// The chat fields of a /v1/chat/completions or /tokenize body.
void add_chat(const v1::ChatInput& chat, Json& body) {
  Json messages = Json::array();
  for (const v1::ChatMessage& message : chat.messages()) messages.push_back(message_json(message));
  body["messages"] = std::move(messages);
  if (chat.has_add_generation_prompt()) {
    body["add_generation_prompt"] = chat.add_generation_prompt();
  }
  if (chat.has_continue_final_message()) {
    body["continue_final_message"] = chat.continue_final_message();
  }
  if (chat.tools_size() > 0) {
    Json tools = Json::array();
    for (const google::protobuf::Struct& tool : chat.tools()) tools.push_back(struct_json(tool));
    body["tools"] = std::move(tools);
  }
  if (chat.has_chat_template_kwargs()) {
    body["chat_template_kwargs"] = struct_json(chat.chat_template_kwargs());
  }
  if (chat.has_tool_choice()) {
    const v1::ToolChoice& choice = chat.tool_choice();
    switch (choice.choice_case()) {
      case v1::ToolChoice::kMode: body["tool_choice"] = choice.mode(); break;
      case v1::ToolChoice::kFunctionName:
        body["tool_choice"] = {{"type", "function"},
                               {"function", {{"name", choice.function_name()}}}};
        break;
      // An empty ToolChoice is a malformed value for the validator to name.
      case v1::ToolChoice::CHOICE_NOT_SET: body["tool_choice"] = Json::object(); break;
    }
  }
  if (chat.has_parallel_tool_calls()) body["parallel_tool_calls"] = chat.parallel_tool_calls();
}

void add_sampling(const v1::SamplingParams& s, Json& body) {
  if (s.has_temperature()) body["temperature"] = s.temperature();
  if (s.has_top_p()) body["top_p"] = s.top_p();
  if (s.has_top_k()) body["top_k"] = s.top_k();
  if (s.has_min_p()) body["min_p"] = s.min_p();
  if (s.has_presence_penalty()) body["presence_penalty"] = s.presence_penalty();
  if (s.has_frequency_penalty()) body["frequency_penalty"] = s.frequency_penalty();
  if (s.has_repetition_penalty()) body["repetition_penalty"] = s.repetition_penalty();
  if (!s.logit_bias().empty()) {
    Json bias = Json::object();
    for (const auto& [id, value] : s.logit_bias()) {
      append_new_key(bias, std::to_string(id), value);
    }
    body["logit_bias"] = std::move(bias);
  }
  if (s.has_seed()) body["seed"] = s.seed();
  if (s.has_n()) body["n"] = s.n();
}

void add_stopping(const v1::StoppingCriteria& s, Json& body) {
  if (s.has_max_tokens()) body["max_tokens"] = s.max_tokens();
  if (s.has_min_tokens()) body["min_tokens"] = s.min_tokens();
  if (s.stop_size() > 0) body["stop"] = json_array(s.stop());
  if (s.stop_token_ids_size() > 0) {
    body["stop_token_ids"] = json_array(s.stop_token_ids());
  }
  if (s.has_include_stop_str_in_output()) {
    body["include_stop_str_in_output"] = s.include_stop_str_in_output();
  }
  if (s.has_ignore_eos()) body["ignore_eos"] = s.ignore_eos();
}

}  // namespace

api::ApiErrorOr<GenerateJson> generate_request_json(const v1::GenerateRequest& request) {
  GenerateJson out;
  Json& body = out.body;
  body = Json::object();
  if (!request.model().empty()) body["model"] = request.model();
  switch (request.input_case()) {
    case v1::GenerateRequest::kText: body["prompt"] = request.text(); break;
    case v1::GenerateRequest::kTokenIds:
      body["prompt"] = json_array(request.token_ids().ids());
      break;
    case v1::GenerateRequest::kChat:
      out.endpoint = api::ApiEndpoint::kChatCompletions;
      add_chat(request.chat(), body);
      break;
    case v1::GenerateRequest::INPUT_NOT_SET:
      return api::ApiError::invalid_request("give one input: text, token_ids or chat", "input");
  }
  body["stream"] = true;
  add_sampling(request.sampling(), body);
  add_stopping(request.stopping(), body);
  if (request.has_logprobs()) {
    // The two HTTP endpoints spell "logprobs with N alternatives" differently.
    if (out.endpoint == api::ApiEndpoint::kChatCompletions) {
      body["logprobs"] = true;
      body["top_logprobs"] = request.logprobs();
    } else {
      body["logprobs"] = request.logprobs();
    }
  }
  if (request.has_prompt_logprobs()) {
    if (out.endpoint == api::ApiEndpoint::kChatCompletions) {
      return api::ApiError::invalid_request(
          "prompt_logprobs needs text or token_ids input, not chat", "prompt_logprobs");
    }
    body["prompt_logprobs"] = request.prompt_logprobs();
  }
  if (request.has_add_special_tokens()) body["add_special_tokens"] = request.add_special_tokens();
  if (request.has_skip_special_tokens()) {
    body["skip_special_tokens"] = request.skip_special_tokens();
  }
  if (request.has_priority()) body["priority"] = request.priority();
  if (request.has_cache_salt()) body["cache_salt"] = request.cache_salt();
  if (request.has_max_reasoning_tokens()) {
    body["max_reasoning_tokens"] = request.max_reasoning_tokens();
  }
  if (request.has_reasoning_effort()) body["reasoning_effort"] = request.reasoning_effort();
  if (request.has_trace()) body["trace"] = request.trace();
  if (request.has_structured_output()) {
    const v1::StructuredOutput& s = request.structured_output();
    api::Json& outputs = body["structured_outputs"] = api::Json::object();
    switch (s.constraint_case()) {
      case v1::StructuredOutput::kJsonSchema: outputs["json"] = s.json_schema(); break;
      case v1::StructuredOutput::kJsonObject: outputs["json_object"] = s.json_object(); break;
      case v1::StructuredOutput::kRegex: outputs["regex"] = s.regex(); break;
      case v1::StructuredOutput::kChoice:
        outputs["choice"] = api::Json::array();
        for (const std::string& choice : s.choice().choices()) outputs["choice"].push_back(choice);
        break;
      case v1::StructuredOutput::kGrammar: outputs["grammar"] = s.grammar(); break;
      case v1::StructuredOutput::CONSTRAINT_NOT_SET: break;
    }
  }
  return out;
}

api::ApiErrorOr<api::Json> tokenize_request_json(const v1::TokenizeRequest& request) {
  Json body = Json::object();
  if (!request.model().empty()) body["model"] = request.model();
  switch (request.input_case()) {
    case v1::TokenizeRequest::kText: body["prompt"] = request.text(); break;
    case v1::TokenizeRequest::kChat: add_chat(request.chat(), body); break;
    case v1::TokenizeRequest::INPUT_NOT_SET:
      return api::ApiError::invalid_request("give one input: text or chat", "input");
  }
  if (request.has_add_special_tokens()) body["add_special_tokens"] = request.add_special_tokens();
  body["return_token_strs"] = request.return_token_strs();
  return body;
}

api::Json detokenize_request_json(const v1::DetokenizeRequest& request) {
  Json body = {{"tokens", json_array(request.token_ids())}};
  if (!request.model().empty()) body["model"] = request.model();
  return body;
}

}  // namespace pagoda::grpc
