#include "api/response_encoder.h"

#include <algorithm>
#include <cmath>

#include "api/forced_tool_call_stream.h"
#include "api/model_list.h"
#include "api/token_spelling.h"
#include "common/check.h"

namespace pagoda::api {

namespace {

// vLLM's stand-in for -inf, which JSON cannot carry.
constexpr double kMinLogprob = -9999.0;

double json_logprob(float logprob) {
  return std::isfinite(logprob) ? std::max(static_cast<double>(logprob), kMinLogprob) : kMinLogprob;
}

Json byte_list(const std::string& bytes) {
  Json list = Json::array();
  for (const char c : bytes) list.push_back(static_cast<unsigned char>(c));
  return list;
}

std::int64_t num_code_points(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

std::string dump(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string sse_event(const Json& json) {
  return "data: " + dump(json) + "\n\n";
}

// OpenAI's system_fingerprint names the backend configuration a response came from; here it is
// the server's version, the same on every response of a build.
const std::string& system_fingerprint() {
  static const std::string fingerprint = "pagoda-" + std::string(pagoda_version());
  return fingerprint;
}

}  // namespace

ResponseEncoder::ResponseEncoder(ResponseOptions options,
                                 std::shared_ptr<const Tokenizer> tokenizer)
    : options_(std::move(options)), tokenizer_(std::move(tokenizer)) {
  PAGODA_CHECK(options_.n >= 1) << "n = " << options_.n;
  PAGODA_CHECK(!options_.num_prompt_tokens.empty()) << "a job without prompts";
  const std::size_t num_prompts = options_.num_prompt_tokens.size();
  options_.echo_texts.resize(num_prompts);
  choices_.resize(num_prompts * static_cast<std::size_t>(options_.n));
  for (Choice& choice : choices_) choice.logprobs = empty_logprobs();
  cached_prompt_tokens_.assign(num_prompts, 0);
}

bool ResponseEncoder::finished() const {
  return num_finished_ == choices_.size();
}

Json ResponseEncoder::empty_logprobs() const {
  if (options_.endpoint == ApiEndpoint::kChatCompletions) return Json::array();
  return {{"tokens", Json::array()},
          {"token_logprobs", Json::array()},
          {"top_logprobs", Json::array()},
          {"text_offset", Json::array()}};
}

std::string ResponseEncoder::add(std::size_t prompt_index, const engine::StreamOutput& output) {
  PAGODA_CHECK(prompt_index < options_.num_prompt_tokens.size())
      << "prompt " << prompt_index << " of " << options_.num_prompt_tokens.size();
  PAGODA_CHECK(output.index >= 0 && output.index < options_.n)
      << "sample " << output.index << " of n = " << options_.n;
  const std::size_t choice_index =
      prompt_index * static_cast<std::size_t>(options_.n) + static_cast<std::size_t>(output.index);
  Choice& choice = choices_[choice_index];
  PAGODA_CHECK(!choice.finished) << "an output after the final one of choice " << choice_index;
  if (output.output.finished) {
    cached_prompt_tokens_[prompt_index] =
        std::max(cached_prompt_tokens_[prompt_index], output.output.usage.num_cached_prompt_tokens);
  }
  if (!output.error.ok()) {
    choice.finished = true;
    ++num_finished_;
    const bool first_error = !error_.has_value();
    if (first_error) error_ = ApiError::from_status(output.error);
    // One error event tells a streaming client; later failures of the same job add nothing.
    return options_.stream && first_error ? error_event(*error_) : std::string();
  }
  if (options_.stream) return stream_output(choice_index, output);
  gather_output(choice_index, output);
  return "";
}

void ResponseEncoder::finish_choice(Choice& choice, const engine::StreamOutput& output) {
  const engine::RequestOutput& out = output.output;
  choice.finished = true;
  ++num_finished_;
  choice.finish_reason = std::string(out.finish_reason());
  choice.num_completion_tokens = options_.drop_generated ? 0 : out.usage.num_completion_tokens;
  choice.num_reasoning_tokens = out.usage.num_reasoning_tokens;
  if (out.stop_string) {
    choice.stop_reason = *out.stop_string;
  } else if (out.stop_token_id) {
    choice.stop_reason = *out.stop_token_id;
  } else {
    choice.stop_reason = nullptr;
  }
}

Json ResponseEncoder::chunk(Json choices) const {
  const bool chat = options_.endpoint == ApiEndpoint::kChatCompletions;
  Json out = {{"id", options_.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", options_.created},
              {"model", options_.model},
              {"system_fingerprint", system_fingerprint()},
              {"choices", std::move(choices)}};
  // As OpenAI does: with include_usage every chunk has the field, null until the last.
  if (options_.include_usage) out["usage"] = nullptr;
  return out;
}

std::string ResponseEncoder::stream_output(std::size_t choice_index,
                                           const engine::StreamOutput& output) {
  const engine::RequestOutput& out = output.output;
  const bool chat = options_.endpoint == ApiEndpoint::kChatCompletions;
  Choice& choice = choices_[choice_index];
  std::string events;
  std::string text = out.text;
  if (!choice.started) {
    choice.started = true;
    if (chat) {
      events += sse_event(chunk(Json::array({{{"index", choice_index},
                                              {"delta", {{"role", "assistant"}, {"content", ""}}},
                                              {"logprobs", nullptr},
                                              {"finish_reason", nullptr}}})));
    }
  }
  if (chat && options_.tool_calls) return events + stream_tool_calls(choice_index, output);
  if (chat && options_.auto_tool_calls) {
    return events + stream_auto_tool_calls(choice_index, output);
  }
  const bool with_logprobs = options_.logprobs.has_value();
  Json entries = empty_logprobs();
  bool first_completion_chunk = false;
  if (!chat && !choice.prompt_started) {
    choice.prompt_started = true;
    first_completion_chunk = true;
    const std::size_t prompt_index = choice_index / static_cast<std::size_t>(options_.n);
    text = options_.echo_texts[prompt_index] + (options_.drop_generated ? "" : text);
    start_prompt_logprobs(prompt_index, out, choice, entries);
  } else if (options_.drop_generated) {
    text.clear();
  }
  const std::string& reasoning = out.reasoning_text;
  const bool prompt_part =
      first_completion_chunk && (options_.echo || options_.prompt_logprobs.has_value());
  if (text.empty() && reasoning.empty() && !out.finished && !prompt_part &&
      !(with_logprobs && !out.logprobs.empty())) {
    return events;
  }
  if (out.finished) finish_choice(choice, output);

  Json logprobs = nullptr;
  if (with_logprobs) {
    if (!options_.drop_generated) append_logprobs(out.logprobs, choice, entries);
    logprobs = chat ? Json{{"content", std::move(entries)}} : std::move(entries);
  }
  Json item = {{"index", choice_index}};
  if (chat) {
    Json delta = Json::object();
    if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
    if (!text.empty() || (reasoning.empty() && !out.finished)) delta["content"] = text;
    item["delta"] = std::move(delta);
  } else {
    item["text"] = text;
  }
  item["logprobs"] = std::move(logprobs);
  if (options_.prompt_logprobs && first_completion_chunk) {
    item["prompt_logprobs"] = std::move(choice.prompt_logprobs);
  }
  item["finish_reason"] = out.finished ? Json(choice.finish_reason) : Json(nullptr);
  if (out.finished) item["stop_reason"] = choice.stop_reason;
  return events + sse_event(chunk(Json::array({std::move(item)})));
}

std::string ResponseEncoder::stream_tool_calls(std::size_t choice_index,
                                               const engine::StreamOutput& output) {
  const engine::RequestOutput& out = output.output;
  Choice& choice = choices_[choice_index];
  choice.text += out.text;
  if (choice.forced_stream == nullptr) {
    choice.forced_stream = std::make_shared<ForcedToolCallStream>(*options_.tool_calls);
  }
  // As OpenAI streams calls: a call's id, type and name (arguments "") in one chunk, then its
  // arguments in fragments; a chunk never carries two entries for one call.
  std::vector<Json> deltas(1, Json::object());
  std::vector<std::size_t> in_last;  // call indices in deltas.back()
  const auto add_entry = [&](std::size_t index, Json entry) {
    if (std::find(in_last.begin(), in_last.end(), index) != in_last.end()) {
      deltas.emplace_back(Json::object());
      in_last.clear();
    }
    deltas.back()["tool_calls"].push_back(std::move(entry));
    in_last.push_back(index);
  };
  if (!out.reasoning_text.empty()) deltas.front()["reasoning_content"] = out.reasoning_text;
  for (ForcedToolCallDelta& piece : choice.forced_stream->feed(out.text)) {
    if (piece.name) {
      add_entry(piece.index, {{"index", piece.index},
                              {"id", forced_call_id(choice_index, piece.index)},
                              {"type", "function"},
                              {"function", {{"name", *piece.name}, {"arguments", ""}}}});
    }
    if (!piece.arguments.empty()) {
      add_entry(piece.index,
                {{"index", piece.index}, {"function", {{"arguments", piece.arguments}}}});
    }
  }
  if (out.finished) {
    finish_choice(choice, output);
    settle_tool_calls(choice_index, choice);
    // An output cut before any call began goes out as text, as it does unstreamed; one cut
    // inside a call keeps what was streamed, with the finish reason saying why it stopped.
    if (!choice.tool_calls.is_array() && !choice.forced_stream->started()) {
      deltas.back()["content"] = choice.text;
    }
  } else if (deltas.size() == 1 && deltas.front().empty() &&
             !(options_.logprobs && !out.logprobs.empty())) {
    return "";
  }
  std::string events;
  for (std::size_t k = 0; k < deltas.size(); ++k) {
    const bool last = out.finished && k + 1 == deltas.size();
    // This output's tokens' logprobs ride on its first chunk.
    Json item = {{"index", choice_index},
                 {"delta", std::move(deltas[k])},
                 {"logprobs", k == 0 ? chat_logprobs(out, choice) : Json(nullptr)},
                 {"finish_reason", last ? Json(choice.finish_reason) : Json(nullptr)}};
    if (last) item["stop_reason"] = choice.stop_reason;
    events += sse_event(chunk(Json::array({std::move(item)})));
  }
  return events;
}

std::string ResponseEncoder::forced_call_id(std::size_t choice_index, std::size_t n) const {
  return "call_" + options_.id.substr(options_.id.find('-') + 1) + std::to_string(choice_index) +
         "_" + std::to_string(n);
}

void ResponseEncoder::settle_tool_calls(std::size_t choice_index, Choice& choice) const {
  if (!options_.tool_calls || choice.finish_reason != "stop") return;
  const std::string id = options_.id.substr(options_.id.find('-') + 1);
  std::optional<Json> calls =
      tool_calls_json(*options_.tool_calls, choice.text, id + std::to_string(choice_index));
  if (!calls) return;
  choice.tool_calls = std::move(*calls);
  choice.finish_reason = "tool_calls";
}

Json ResponseEncoder::tool_call_json(std::size_t choice_index, std::size_t n,
                                     const tools::ToolCall& call) const {
  const std::string id = options_.id.substr(options_.id.find('-') + 1);
  return Json{{"id", "call_" + id + std::to_string(choice_index) + "_" + std::to_string(n)},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

void ResponseEncoder::settle_auto_tool_calls(std::size_t choice_index, Choice& choice) const {
  if (!options_.auto_tool_calls) return;
  tools::ToolOutput out = tools::parse_tool_output(*options_.auto_tool_calls, choice.text);
  if (out.calls.empty()) return;
  choice.tool_calls = Json::array();
  for (std::size_t n = 0; n < out.calls.size(); ++n) {
    choice.tool_calls.push_back(tool_call_json(choice_index, n, out.calls[n]));
  }
  choice.text = std::move(out.content);
  choice.finish_reason = "tool_calls";
}

std::string ResponseEncoder::stream_auto_tool_calls(std::size_t choice_index,
                                                    const engine::StreamOutput& output) {
  const engine::RequestOutput& out = output.output;
  Choice& choice = choices_[choice_index];
  if (choice.tool_stream == nullptr) {
    choice.tool_stream = std::make_shared<tools::ToolCallStream>(*options_.auto_tool_calls);
  }
  tools::ToolStreamStep step = choice.tool_stream->feed(out.text);
  if (out.finished) {
    tools::ToolStreamStep rest = choice.tool_stream->finish();
    step.content += rest.content;
    for (tools::ToolCallDelta& d : rest.calls) step.calls.push_back(std::move(d));
    finish_choice(choice, output);
    if (choice.tool_stream->sent_calls()) choice.finish_reason = "tool_calls";
  }
  Json delta = Json::object();
  if (!out.reasoning_text.empty()) delta["reasoning_content"] = out.reasoning_text;
  if (!step.content.empty()) delta["content"] = step.content;
  if (!step.calls.empty()) {
    Json calls = Json::array();
    for (const tools::ToolCallDelta& d : step.calls) {
      Json call = tool_call_json(choice_index, d.index, d.call);
      call["index"] = d.index;
      calls.push_back(std::move(call));
    }
    delta["tool_calls"] = std::move(calls);
  }
  // Each output's tokens carry their logprobs in its own chunk, as on the plain path, even when
  // their text is held back for now.
  const bool with_logprobs = options_.logprobs.has_value() && !out.logprobs.empty();
  if (delta.empty() && !out.finished && !with_logprobs) return "";
  Json item = {{"index", choice_index},
               {"delta", std::move(delta)},
               {"logprobs", chat_logprobs(out, choice)},
               {"finish_reason", out.finished ? Json(choice.finish_reason) : Json(nullptr)}};
  if (out.finished) item["stop_reason"] = choice.stop_reason;
  return sse_event(chunk(Json::array({std::move(item)})));
}

Json ResponseEncoder::chat_logprobs(const engine::RequestOutput& out, Choice& choice) const {
  if (!options_.logprobs) return nullptr;
  Json entries = Json::array();
  append_logprobs(out.logprobs, choice, entries);
  return {{"content", std::move(entries)}};
}

void ResponseEncoder::gather_output(std::size_t choice_index, const engine::StreamOutput& output) {
  Choice& choice = choices_[choice_index];
  if (!choice.started) {
    choice.started = true;
    const std::size_t prompt_index = choice_index / static_cast<std::size_t>(options_.n);
    choice.text = options_.echo_texts[prompt_index];
    if (options_.endpoint == ApiEndpoint::kCompletions) {
      start_prompt_logprobs(prompt_index, output.output, choice, choice.logprobs);
    }
  }
  if (!options_.drop_generated) {
    choice.text += output.output.text;
    choice.reasoning += output.output.reasoning_text;
    if (options_.logprobs) append_logprobs(output.output.logprobs, choice, choice.logprobs);
  }
  if (output.output.finished) {
    finish_choice(choice, output);
    settle_tool_calls(choice_index, choice);
    settle_auto_tool_calls(choice_index, choice);
  }
}

void ResponseEncoder::start_prompt_logprobs(std::size_t prompt_index,
                                            const engine::RequestOutput& out, Choice& choice,
                                            Json& into) const {
  if (options_.echo_logprobs) {
    // The first token has nothing before it to condition on: null, as OpenAI and vLLM send.
    const std::string first =
        spell_token(*tokenizer_, options_.first_prompt_tokens[prompt_index]).text;
    into["tokens"].push_back(first);
    into["token_logprobs"].push_back(nullptr);
    into["top_logprobs"].push_back(nullptr);
    into["text_offset"].push_back(choice.text_offset);
    choice.text_offset += num_code_points(first);
    // The engine computed max(logprobs, prompt_logprobs) alternatives; echo shows `logprobs`.
    std::vector<engine::TokenLogprobs> entries = out.prompt_logprobs;
    for (engine::TokenLogprobs& e : entries) {
      if (e.top.size() > static_cast<std::size_t>(*options_.logprobs)) {
        e.top.resize(static_cast<std::size_t>(*options_.logprobs));
      }
    }
    append_logprobs(entries, choice, into);
  }
  if (options_.prompt_logprobs) {
    Json list = Json::array({nullptr});
    for (const engine::TokenLogprobs& e : out.prompt_logprobs) {
      Json entry = Json::object();
      const auto n = std::min(e.top.size(), static_cast<std::size_t>(*options_.prompt_logprobs));
      for (std::size_t k = 0; k < n; ++k) {
        const auto& [id, logprob] = e.top[k];
        entry[std::to_string(id)] = {{"logprob", json_logprob(logprob)},
                                     {"rank", k + 1},
                                     {"decoded_token", spell_token(*tokenizer_, id).text}};
      }
      const std::string key = std::to_string(e.token_id);
      if (!entry.contains(key)) {
        entry[key] = {{"logprob", json_logprob(e.logprob)},
                      {"rank", e.rank},
                      {"decoded_token", spell_token(*tokenizer_, e.token_id).text}};
      }
      list.push_back(std::move(entry));
    }
    choice.prompt_logprobs = std::move(list);
  }
}

void ResponseEncoder::append_logprobs(const std::vector<engine::TokenLogprobs>& logprobs,
                                      Choice& choice, Json& into) const {
  const bool chat = options_.endpoint == ApiEndpoint::kChatCompletions;
  for (const engine::TokenLogprobs& entry : logprobs) {
    const TokenSpelling sampled = spell_token(*tokenizer_, entry.token_id);
    if (chat) {
      Json top = Json::array();
      for (const auto& [id, logprob] : entry.top) {
        const TokenSpelling alt = spell_token(*tokenizer_, id);
        top.push_back({{"token", alt.text},
                       {"logprob", json_logprob(logprob)},
                       {"bytes", byte_list(alt.bytes)}});
      }
      into.push_back({{"token", sampled.text},
                      {"logprob", json_logprob(entry.logprob)},
                      {"bytes", byte_list(sampled.bytes)},
                      {"top_logprobs", std::move(top)}});
      continue;
    }
    // Completions: the alternatives as a {token: logprob} map that includes the sampled token.
    Json top = Json::object();
    for (const auto& [id, logprob] : entry.top) {
      const std::string text = spell_token(*tokenizer_, id).text;
      if (!top.contains(text)) top[text] = json_logprob(logprob);
    }
    if (!top.contains(sampled.text)) top[sampled.text] = json_logprob(entry.logprob);
    into["tokens"].push_back(sampled.text);
    into["token_logprobs"].push_back(json_logprob(entry.logprob));
    into["top_logprobs"].push_back(std::move(top));
    into["text_offset"].push_back(choice.text_offset);
    choice.text_offset += num_code_points(sampled.text);
  }
}

Json ResponseEncoder::usage_json() const {
  std::int64_t prompt = 0;
  std::int64_t cached = 0;
  std::int64_t completion = 0;
  for (const std::int64_t n : options_.num_prompt_tokens) prompt += n;
  for (const std::int64_t n : cached_prompt_tokens_) cached += n;
  std::int64_t reasoning = 0;
  for (const Choice& choice : choices_) {
    completion += choice.num_completion_tokens;
    reasoning += choice.num_reasoning_tokens;
  }
  Json usage = {{"prompt_tokens", prompt},
                {"completion_tokens", completion},
                {"total_tokens", prompt + completion},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  if (options_.reasoning) usage["completion_tokens_details"] = {{"reasoning_tokens", reasoning}};
  return usage;
}

std::string ResponseEncoder::finish_stream() {
  PAGODA_CHECK(options_.stream) << "finish_stream() on a non-streaming job";
  std::string events;
  if (options_.include_usage) {
    Json last = chunk(Json::array());
    last["usage"] = usage_json();
    events += sse_event(last);
  }
  return events + "data: [DONE]\n\n";
}

Json ResponseEncoder::choice_json(std::size_t choice_index, const Choice& choice) const {
  const bool chat = options_.endpoint == ApiEndpoint::kChatCompletions;
  Json item = {{"index", choice_index}};
  if (chat && choice.tool_calls.is_array()) {
    // Forced calls are the whole output; auto calls keep the text around them as content.
    const bool content = options_.auto_tool_calls != nullptr && !choice.text.empty();
    item["message"] = {{"role", "assistant"},
                       {"content", content ? Json(choice.text) : Json(nullptr)},
                       {"tool_calls", choice.tool_calls}};
    if (options_.reasoning) {
      item["message"]["reasoning_content"] =
          choice.reasoning.empty() ? Json(nullptr) : Json(choice.reasoning);
    }
  } else if (chat) {
    item["message"] = {{"role", "assistant"}, {"content", choice.text}};
    if (options_.reasoning) {
      item["message"]["reasoning_content"] =
          choice.reasoning.empty() ? Json(nullptr) : Json(choice.reasoning);
    }
  } else {
    item["text"] = choice.text;
  }
  if (!options_.logprobs) {
    item["logprobs"] = nullptr;
  } else {
    item["logprobs"] = chat ? Json{{"content", choice.logprobs}} : choice.logprobs;
  }
  if (options_.prompt_logprobs) item["prompt_logprobs"] = choice.prompt_logprobs;
  item["finish_reason"] = choice.finished ? Json(choice.finish_reason) : Json(nullptr);
  item["stop_reason"] = choice.stop_reason;
  return item;
}

EncodedBody ResponseEncoder::finish_body() {
  PAGODA_CHECK(!options_.stream) << "finish_body() on a streaming job";
  if (error_) return {error_->http_status, error_->body()};
  const bool chat = options_.endpoint == ApiEndpoint::kChatCompletions;
  Json body = {{"id", options_.id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", options_.created},
               {"model", options_.model},
               {"system_fingerprint", system_fingerprint()}};
  Json choices = Json::array();
  for (std::size_t i = 0; i < choices_.size(); ++i) choices.push_back(choice_json(i, choices_[i]));
  body["choices"] = std::move(choices);
  body["usage"] = usage_json();
  return {200, dump(body)};
}

std::string ResponseEncoder::error_event(const ApiError& error) {
  return sse_event(error.to_json());
}

}  // namespace pagoda::api
