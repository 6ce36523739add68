// What parsing a chat or completion request produces: the engine requests to submit and the
// options the response encoder needs. Transport independent: HTTP and gRPC both submit
// `requests` and feed the outputs to a ResponseEncoder built from `response`.
//
//   body --parse_chat_request / parse_completion_request--> GenerationJob
//     constraint   --ConstraintCompiler::compile_async, off the frontend's thread-->
//                  attach_constraint (structured_output.h)
//     requests[p]  --EngineClient::submit--> OutputStream p --> ResponseEncoder::add(p, output)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/forced_tool_calls.h"
#include "engine/engine_client.h"
#include "structured/constraint_spec.h"
#include "tools/tool_call_format.h"

namespace pagoda::api {

/// Which OpenAI endpoint a job answers; decides the response objects' shapes.
enum class ApiEndpoint : std::uint8_t {
  kChatCompletions,  ///< /v1/chat/completions: "chat.completion" / "chat.completion.chunk".
  kCompletions,      ///< /v1/completions: "text_completion".
};

/// Per-request facts a frontend may supply; empty fields are filled in by the parser.
struct RequestContext {
  /// Response id; empty: "chatcmpl-" or "cmpl-" followed by 32 random hex digits.
  std::string id;
  /// Response `created` in Unix seconds; 0: now.
  std::int64_t created = 0;
};

/// How to shape the response of one job.
struct ResponseOptions {
  ApiEndpoint endpoint = ApiEndpoint::kChatCompletions;
  /// Response `id` ("chatcmpl-...", "cmpl-...").
  std::string id;
  /// Response `model`: the name the client asked for (or the served name when it gave none).
  std::string model;
  /// Response `created`, Unix seconds.
  std::int64_t created = 0;
  /// Samples per prompt; choice index = prompt_index * n + sample index.
  std::int64_t n = 1;
  /// Server-sent events (true) or one JSON body (false).
  bool stream = false;
  /// stream_options.include_usage: a last chunk with empty choices and the usage.
  bool include_usage = false;
  /// Top alternatives per token when logprobs were asked for (chat: top_logprobs; completions:
  /// the integer logprobs); unset: no logprobs in the response.
  std::optional<std::int32_t> logprobs;
  /// Completions `echo`: each choice's text starts with its prompt's text (echo_texts).
  bool echo = false;
  /// Per prompt: the text echoed before its choices (empty unless echo).
  std::vector<std::string> echo_texts;
  /// Completions echo with logprobs: each choice's logprobs start with its prompt's tokens (the
  /// first with null logprobs), from the engine's prompt logprobs.
  bool echo_logprobs = false;
  /// Per prompt with echo_logprobs: its first token (the only one without a prompt logprob).
  std::vector<std::int32_t> first_prompt_tokens;
  /// vLLM's prompt_logprobs: each choice carries "prompt_logprobs", null for the first token
  /// then {token id: {logprob, rank, decoded_token}} with this many alternatives.
  std::optional<std::int32_t> prompt_logprobs;
  /// echo with max_tokens 0: the engine generates one token, which the response leaves out (the
  /// prompt and its logprobs are the answer; completion_tokens 0).
  bool drop_generated = false;
  /// Chat with a reasoning parser: reasoning_content in messages and deltas, reasoning_tokens in
  /// usage.completion_tokens_details.
  bool reasoning = false;
  /// Per prompt: its length in tokens (usage.prompt_tokens sums them).
  std::vector<std::int64_t> num_prompt_tokens;
  /// Chat with forced tool calls (tool_choice "required" or named): the output becomes
  /// message.tool_calls, streamed whole in the last chunk (forced_tool_calls.h).
  std::optional<ToolCallFormat> tool_calls;
  /// Chat with tools and tool_choice "auto" on a server with --enable-auto-tool-choice: the
  /// output is parsed for calls in this format (src/tools/), which become message.tool_calls
  /// beside the text around them; streamed, each call goes out whole once it has closed.
  std::shared_ptr<const tools::ToolCallFormat> auto_tool_calls;
};

/// A structured-output constraint a request asks for, and the parameter it came from (for
/// error messages).
struct StructuredOutputRequest {
  structured::ConstraintSpec spec;
  std::string param;
};

/// A validated request: compile `constraint` when set, then submit every entry of `requests`
/// (one per prompt), then encode.
struct GenerationJob {
  /// One per prompt, in prompt order; request_id is unique per prompt ("<id>-<p>" when there
  /// are several prompts). Each carries sampling.n, which the engine fans out.
  std::vector<engine::EngineRequest> requests;
  ResponseOptions response;
  /// The constraint still to compile (already checked to be servable); attach_constraint puts
  /// the compiled result on every request. Compiles take up to seconds, so the frontends run
  /// them off the thread that received the request.
  std::optional<StructuredOutputRequest> constraint;
};

}  // namespace pagoda::api
