// Engine outputs to OpenAI response bytes, for one chat or completion job. In streaming mode each
// output becomes complete server-sent events; otherwise the outputs are gathered into the final
// JSON body. Transport independent: the caller writes the strings it gets.
//
//   streaming, n = 2, include_usage:
//     data: {choices:[{index:0, delta:{role:"assistant", content:""}}]}     first output of 0
//     data: {choices:[{index:0, delta:{content:"Hi"}}]}
//     data: {choices:[{index:1, delta:{role:"assistant", content:""}}]}     first output of 1
//     data: {choices:[{index:1, delta:{content:"Yo"}, finish_reason:"stop"}]}
//     data: {choices:[{index:0, delta:{content:"!"}, finish_reason:"length"}]}
//     data: {choices:[], usage:{prompt_tokens, completion_tokens, total_tokens, ...}}  finish
//
// Every chunk and body carries system_fingerprint ("pagoda-<version>"); with include_usage every
// chunk before the last has "usage": null, as OpenAI sends it.
//     data: [DONE]                                                                      finish
//
// Choice index = prompt_index * n + StreamOutput::index. An output carrying an engine error
// becomes an error event (streaming) or makes the body an error (non-streaming): a request never
// ends in a silent truncation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/api_error.h"
#include "api/forced_tool_call_stream.h"
#include "api/generation_job.h"
#include "engine/output_channel.h"
#include "pagoda/tokenizer.h"
#include "tools/tool_call_stream.h"

namespace pagoda::api {

/// The non-streaming result: what to send, with which HTTP status.
struct EncodedBody {
  int http_status = 200;
  std::string body;
};

/// Encodes one job's outputs. Not thread-safe: one consumer per job.
class ResponseEncoder {
 public:
  /// `tokenizer` spells the tokens of logprobs.
  ResponseEncoder(ResponseOptions options, std::shared_ptr<const Tokenizer> tokenizer);

  /// Takes one output of prompt `prompt_index`'s stream. Streaming: returns the SSE events to
  /// send now (possibly empty). Non-streaming: gathers it and returns "".
  std::string add(std::size_t prompt_index, const engine::StreamOutput& output);

  /// Whether every choice has had its final output.
  bool finished() const;

  /// Streaming only: the usage chunk (when include_usage) and "data: [DONE]\n\n". Call once,
  /// after the last add().
  std::string finish_stream();

  /// Non-streaming only: the chat.completion / text_completion body, or the error body when an
  /// output carried an engine error. Call once, after the last add().
  EncodedBody finish_body();

  /// The usage so far (prompt tokens of every prompt, completion tokens of every choice).
  Json usage_json() const;

  /// One SSE event carrying `error` (for errors after the stream has started).
  static std::string error_event(const ApiError& error);

 private:
  // What one choice has produced so far.
  struct Choice {
    bool started = false;         // first output seen (role / echo sent)
    bool prompt_started = false;  // streaming completions: echo and prompt logprobs sent
    bool finished = false;        // final output seen
    std::string text;             // non-streaming: the whole text
    std::string reasoning;        // non-streaming: the whole reasoning_content
    Json logprobs;  // non-streaming: the entries gathered (chat content / completions)
    std::string finish_reason;
    Json stop_reason;  // null, the stop token id, or the stop string
    std::int64_t num_completion_tokens = 0;
    std::int64_t num_reasoning_tokens = 0;
    std::int64_t text_offset = 0;  // completions logprobs: code points before the next token
    Json prompt_logprobs;          // vLLM's prompt_logprobs (null unless asked for)
    Json tool_calls;               // forced tool calls: the calls, once finished (else null)
    // Auto tool calls, streaming: the output's split into content and calls so far.
    std::shared_ptr<tools::ToolCallStream> tool_stream;
    // Forced tool calls, streaming: the calls read so far.
    std::shared_ptr<ForcedToolCallStream> forced_stream;
  };

  // A streamed chunk of `choices`: id, object, created, model, system_fingerprint, and "usage":
  // null when include_usage asks for a usage chunk at the end.
  Json chunk(Json choices) const;
  std::string stream_output(std::size_t choice_index, const engine::StreamOutput& output);
  void gather_output(std::size_t choice_index, const engine::StreamOutput& output);
  void finish_choice(Choice& choice, const engine::StreamOutput& output);
  // Appends the entries for `logprobs` to `into` (chat: content list; completions: the four
  // parallel lists).
  void append_logprobs(const std::vector<engine::TokenLogprobs>& logprobs, Choice& choice,
                       Json& into) const;
  Json empty_logprobs() const;
  // A streamed chat chunk's "logprobs": {"content": entries of `out`'s tokens}, or null when
  // the request did not ask for them.
  Json chat_logprobs(const engine::RequestOutput& out, Choice& choice) const;
  // On a choice's first output: echo's prompt entries (into the completions lists `into`) and
  // vLLM's prompt_logprobs list, from the engine's prompt logprobs.
  void start_prompt_logprobs(std::size_t prompt_index, const engine::RequestOutput& out,
                             Choice& choice, Json& into) const;
  Json choice_json(std::size_t choice_index, const Choice& choice) const;
  // Forced tool calls: a finished choice's text read as its calls (finish_reason "tool_calls"),
  // unless it was cut short (then it stays text, with its own finish reason).
  void settle_tool_calls(std::size_t choice_index, Choice& choice) const;
  // Forced tool calls, streaming: each call's id and name, then its arguments piece by piece.
  std::string stream_tool_calls(std::size_t choice_index, const engine::StreamOutput& output);
  // The id of forced call `n` of a choice (tool_calls_json writes the same).
  std::string forced_call_id(std::size_t choice_index, std::size_t n) const;
  // Auto tool calls: a finished choice's text split into content and calls (finish_reason
  // "tool_calls" when there are calls).
  void settle_auto_tool_calls(std::size_t choice_index, Choice& choice) const;
  // Auto tool calls, streaming: content as it becomes safe, each call once it has closed.
  std::string stream_auto_tool_calls(std::size_t choice_index, const engine::StreamOutput& output);
  // The OpenAI tool_calls entry of call `n` of a choice.
  Json tool_call_json(std::size_t choice_index, std::size_t n, const tools::ToolCall& call) const;

  ResponseOptions options_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<Choice> choices_;
  std::vector<std::int64_t> cached_prompt_tokens_;  // per prompt
  std::optional<ApiError> error_;
  std::size_t num_finished_ = 0;
};

}  // namespace pagoda::api
