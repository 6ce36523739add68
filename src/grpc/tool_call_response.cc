#include "grpc/tool_call_response.h"

#include <utility>

#include "api/forced_tool_calls.h"
#include "tools/tool_call_stream.h"

namespace pagoda::grpc {

ToolCallResponse::ToolCallResponse(const api::ResponseOptions& options, std::string request_id)
    : forced_(options.tool_calls),
      auto_(options.auto_tool_calls),
      // As HTTP's ids ("call_<id after its prefix><sample>_<n>").
      id_(request_id.substr(request_id.find('-') + 1)) {}

void ToolCallResponse::add(const engine::StreamOutput& item, v1::GenerateResponse& response) {
  if (!forced_ && auto_ == nullptr) return;
  std::string& text = texts_[item.index];
  text += item.output.text;
  if (!item.output.finished || !item.error.ok()) return;
  const std::string stem = "call_" + id_ + std::to_string(item.index) + "_";
  if (forced_) {
    // A forced output cut short (max_tokens) stays text, as over HTTP.
    if (item.output.finish_reason() != "stop") return;
    const std::optional<api::Json> calls =
        api::tool_calls_json(*forced_, text, id_ + std::to_string(item.index));
    if (!calls) return;
    for (const api::Json& call : *calls) {
      v1::ToolCall& out = *response.add_tool_calls();
      out.set_id(call["id"].get<std::string>());
      out.set_function_name(call["function"]["name"].get<std::string>());
      out.set_function_arguments(call["function"]["arguments"].get<std::string>());
    }
  } else {
    tools::ToolOutput parsed = tools::parse_tool_output(*auto_, text);
    if (parsed.calls.empty()) return;
    for (std::size_t n = 0; n < parsed.calls.size(); ++n) {
      v1::ToolCall& out = *response.add_tool_calls();
      out.set_id(stem + std::to_string(n));
      out.set_function_name(parsed.calls[n].name);
      out.set_function_arguments(parsed.calls[n].arguments);
    }
    response.set_content(std::move(parsed.content));
  }
  response.set_finish_reason(v1::FINISH_REASON_TOOL_CALLS);
  texts_.erase(item.index);
}

}  // namespace pagoda::grpc
