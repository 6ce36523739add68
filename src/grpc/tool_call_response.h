// Tool calls on a Generate stream, as the HTTP API makes them: a forced tool_choice's output
// (api/forced_tool_calls.h) or an "auto" output read by the server's tool-call parser
// (src/tools/) becomes GenerateResponse.tool_calls on the sample's last message, with
// finish_reason TOOL_CALLS (and, for auto, the text outside the calls as `content`). The text
// deltas stream as they are; each sample's text is kept until its last message.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "api/generation_job.h"
#include "engine/output_channel.h"
#include "pagoda/v1/generate.pb.h"

namespace pagoda::grpc {

/// One Generate call's tool calls. Not thread-safe.
class ToolCallResponse {
 public:
  /// For a job answered under `request_id`; does nothing unless `options` asks for tool calls.
  ToolCallResponse(const api::ResponseOptions& options, std::string request_id);

  /// Call after fill_generate_response(item, ...) with its message.
  void add(const engine::StreamOutput& item, v1::GenerateResponse& response);

 private:
  std::optional<api::ToolCallFormat> forced_;
  std::shared_ptr<const tools::ToolCallFormat> auto_;
  std::string id_;                             // the call ids' stem, as HTTP's
  std::map<std::int64_t, std::string> texts_;  // by sample index
};

}  // namespace pagoda::grpc
