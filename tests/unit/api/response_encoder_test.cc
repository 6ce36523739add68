#include "api/response_encoder.h"

#include <gtest/gtest.h>

#include <limits>

#include "api/model_list.h"
#include "api_test_models.h"

namespace pagoda::api {
namespace {

using engine::RequestStatus;
using engine::StreamOutput;

StreamOutput delta(std::int64_t index, std::string text) {
  StreamOutput out;
  out.index = index;
  out.output.text = std::move(text);
  out.output.token_ids = engine::bytes_of(out.output.text);
  return out;
}

StreamOutput final_output(std::int64_t index, std::string text, std::int64_t prompt_tokens,
                          std::int64_t completion_tokens,
                          RequestStatus status = RequestStatus::kFinishedStopped) {
  StreamOutput out = delta(index, std::move(text));
  out.output.finished = true;
  out.output.status = status;
  out.output.usage = {.num_prompt_tokens = prompt_tokens,
                      .num_completion_tokens = completion_tokens,
                      .num_cached_prompt_tokens = 0};
  return out;
}

// Splits "data: X\n\n" events; [DONE] is kept as the string "[DONE]".
std::vector<Json> events(const std::string& sse) {
  std::vector<Json> out;
  std::size_t at = 0;
  while (at < sse.size()) {
    EXPECT_EQ(sse.compare(at, 6, "data: "), 0) << sse.substr(at);
    const std::size_t end = sse.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string payload = sse.substr(at + 6, end - at - 6);
    out.push_back(payload == "[DONE]" ? Json("[DONE]") : Json::parse(payload));
    at = end + 2;
  }
  return out;
}

ResponseOptions options(ApiEndpoint endpoint, bool stream, std::int64_t n = 1,
                        std::vector<std::int64_t> prompt_tokens = {4}) {
  ResponseOptions o;
  o.endpoint = endpoint;
  o.id = endpoint == ApiEndpoint::kChatCompletions ? "chatcmpl-x" : "cmpl-x";
  o.model = "test-model";
  o.created = 123;
  o.n = n;
  o.stream = stream;
  o.num_prompt_tokens = std::move(prompt_tokens);
  return o;
}

class ResponseEncoderTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Tokenizer> tokenizer_ = engine::make_byte_tokenizer();
};

TEST_F(ResponseEncoderTest, ChatStreamRoleFirstFinishReasonLastThenDone) {
  ResponseEncoder encoder(options(ApiEndpoint::kChatCompletions, true), tokenizer_);
  std::string sse = encoder.add(0, delta(0, "Hel"));
  EXPECT_FALSE(encoder.finished());
  sse += encoder.add(0, final_output(0, "lo", 4, 5));
  EXPECT_TRUE(encoder.finished());
  sse += encoder.finish_stream();
  const std::vector<Json> e = events(sse);
  ASSERT_EQ(e.size(), 4U) << sse;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(e[i]["id"], "chatcmpl-x");
    EXPECT_EQ(e[i]["object"], "chat.completion.chunk");
    EXPECT_EQ(e[i]["created"], 123);
    EXPECT_EQ(e[i]["model"], "test-model");
    EXPECT_EQ(e[i]["system_fingerprint"], "pagoda-" + std::string(pagoda_version()));
    EXPECT_FALSE(e[i].contains("usage")) << "no include_usage, no usage field";
    ASSERT_EQ(e[i]["choices"].size(), 1U);
    EXPECT_EQ(e[i]["choices"][0]["index"], 0);
  }
  EXPECT_EQ(e[0]["choices"][0]["delta"], Json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(e[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(e[1]["choices"][0]["delta"], Json::parse(R"({"content": "Hel"})"));
  EXPECT_TRUE(e[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(e[2]["choices"][0]["delta"], Json::parse(R"({"content": "lo"})"));
  EXPECT_EQ(e[2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(e[3], "[DONE]");
}

TEST_F(ResponseEncoderTest, ChatStreamTwoChoicesWithUsage) {
  ResponseOptions o = options(ApiEndpoint::kChatCompletions, true, 2);
  o.include_usage = true;
  ResponseEncoder encoder(o, tokenizer_);
  std::string sse = encoder.add(0, delta(0, "A"));
  sse += encoder.add(0, delta(1, "B"));
  StreamOutput last1 = final_output(1, "", 4, 2, RequestStatus::kFinishedLength);
  last1.output.token_ids = {'b'};
  sse += encoder.add(0, last1);
  sse += encoder.add(0, final_output(0, "a", 4, 3));
  sse += encoder.finish_stream();
  const std::vector<Json> e = events(sse);
  ASSERT_EQ(e.size(), 8U) << sse;
  // Each choice: a role chunk first, content, then one chunk with its finish_reason.
  std::vector<std::string> seen;
  for (std::size_t i = 0; i + 2 < e.size(); ++i) {
    const Json& c = e[i]["choices"][0];
    const std::string tag =
        std::to_string(c["index"].get<int>()) + ":" +
        (c["delta"].contains("role") ? "role" : c["delta"].value("content", "<none>")) +
        (c["finish_reason"].is_null() ? "" : "/" + c["finish_reason"].get<std::string>());
    seen.push_back(tag);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"0:role", "0:A", "1:role", "1:B", "1:<none>/length",
                                            "0:a/stop"}));
  // OpenAI's shape: every chunk before the last has "usage": null.
  for (std::size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(e[i].contains("usage")) << i;
    EXPECT_TRUE(e[i]["usage"].is_null()) << i;
  }
  EXPECT_EQ(e[6]["choices"], Json::array());
  EXPECT_EQ(e[6]["usage"], Json::parse(R"({"prompt_tokens": 4, "completion_tokens": 5,
      "total_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}})"));
  EXPECT_EQ(e[7], "[DONE]");
}

TEST_F(ResponseEncoderTest, ChatBodyWithLogprobsKeepsSplitCharacterBytes) {
  ResponseOptions o = options(ApiEndpoint::kChatCompletions, false);
  o.logprobs = 1;
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput out = final_output(0, "\xC3\xA9", 4, 2);
  out.output.stop_token_id = 256;
  out.output.logprobs = {{.token_id = 0xC3, .logprob = -0.5F, .top = {{0xC3, -0.5F}}},
                         {.token_id = 0xA9,
                          .logprob = -std::numeric_limits<float>::infinity(),
                          .top = {{'x', -0.25F}}}};
  EXPECT_EQ(encoder.add(0, out), "");
  const EncodedBody body = encoder.finish_body();
  EXPECT_EQ(body.http_status, 200);
  const Json b = Json::parse(body.body);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["id"], "chatcmpl-x");
  const Json& choice = b["choices"][0];
  EXPECT_EQ(choice["message"], Json::parse(R"({"role": "assistant", "content": "é"})"));
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["stop_reason"], 256);
  const Json& content = choice["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2U);
  EXPECT_EQ(content[0]["token"], "\xEF\xBF\xBD") << "alone, half a character decodes to U+FFFD";
  EXPECT_EQ(content[0]["bytes"], Json::array({0xC3}));
  EXPECT_EQ(content[1]["bytes"], Json::array({0xA9}));
  EXPECT_DOUBLE_EQ(content[0]["logprob"].get<double>(), -0.5);
  EXPECT_EQ(content[1]["logprob"], -9999.0) << "-inf is not JSON; vLLM's floor stands in";
  EXPECT_EQ(content[1]["top_logprobs"],
            Json::parse(R"([{"token": "x", "logprob": -0.25, "bytes": [120]}])"));
  EXPECT_EQ(b["usage"]["total_tokens"], 6);
  EXPECT_EQ(b["system_fingerprint"], "pagoda-" + std::string(pagoda_version()));
}

TEST_F(ResponseEncoderTest, CompletionsStreamEchoesThePromptFirst) {
  ResponseOptions o = options(ApiEndpoint::kCompletions, true, 1, {2});
  o.echo = true;
  o.echo_texts = {"Hi"};
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput last = final_output(0, " there", 2, 2);
  last.output.stop_string = "!";
  const std::vector<Json> e = events(encoder.add(0, last) + encoder.finish_stream());
  ASSERT_EQ(e.size(), 2U);
  EXPECT_EQ(e[0]["object"], "text_completion");
  EXPECT_EQ(e[0]["choices"][0]["text"], "Hi there");
  EXPECT_EQ(e[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(e[0]["choices"][0]["stop_reason"], "!");
  EXPECT_TRUE(e[0]["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(e[1], "[DONE]");
}

TEST_F(ResponseEncoderTest, CompletionsBodyIndexesChoicesByPromptThenSample) {
  ResponseEncoder encoder(options(ApiEndpoint::kCompletions, false, 2, {3, 5}), tokenizer_);
  // Outputs arrive in any order across prompts and samples.
  EXPECT_EQ(encoder.add(1, final_output(1, "d", 5, 1)), "");
  EXPECT_EQ(encoder.add(0, final_output(1, "b", 3, 1)), "");
  EXPECT_EQ(encoder.add(1, final_output(0, "c", 5, 1, RequestStatus::kFinishedLength)), "");
  EXPECT_FALSE(encoder.finished());
  EXPECT_EQ(encoder.add(0, final_output(0, "a", 3, 2)), "");
  EXPECT_TRUE(encoder.finished());
  const Json b = Json::parse(encoder.finish_body().body);
  EXPECT_EQ(b["object"], "text_completion");
  ASSERT_EQ(b["choices"].size(), 4U);
  const std::vector<std::string> texts = {"a", "b", "c", "d"};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b["choices"][i]["index"], i);
    EXPECT_EQ(b["choices"][i]["text"], texts[i]);
  }
  EXPECT_EQ(b["choices"][2]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["prompt_tokens"], 8) << "each prompt counts once, not once per sample";
  EXPECT_EQ(b["usage"]["completion_tokens"], 5);
}

TEST_F(ResponseEncoderTest, CompletionsLogprobsShape) {
  ResponseOptions o = options(ApiEndpoint::kCompletions, false);
  o.logprobs = 2;
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput out = final_output(0, "\xC3\xA9z", 4, 3);
  out.output.logprobs = {{.token_id = 0xC3, .logprob = -1.0F, .top = {{'q', -0.5F}, {'r', -0.75F}}},
                         {.token_id = 0xA9, .logprob = -0.5F, .top = {{0xA9, -0.5F}, {'s', -2.0F}}},
                         {.token_id = 'z', .logprob = -0.25F, .top = {}}};
  (void)encoder.add(0, out);
  const Json lp = Json::parse(encoder.finish_body().body)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], Json::parse(R"(["\ufffd", "\ufffd", "z"])"));
  EXPECT_EQ(lp["token_logprobs"], Json::parse("[-1.0, -0.5, -0.25]"));
  EXPECT_EQ(lp["top_logprobs"][0], Json::parse(R"({"q": -0.5, "r": -0.75, "\ufffd": -1.0})"))
      << "the sampled token joins its alternatives";
  EXPECT_EQ(lp["top_logprobs"][1], Json::parse(R"({"\ufffd": -0.5, "s": -2.0})"));
  EXPECT_EQ(lp["top_logprobs"][2], Json::parse(R"({"z": -0.25})"));
  EXPECT_EQ(lp["text_offset"], Json::parse("[0, 1, 2]"));
}

TEST_F(ResponseEncoderTest, ChatStreamLogprobsTravelWithTheirDelta) {
  ResponseOptions o = options(ApiEndpoint::kChatCompletions, true);
  o.logprobs = 0;
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput held = delta(0, "");
  held.output.token_ids = {0xC3};
  held.output.logprobs = {{.token_id = 0xC3, .logprob = -0.5F, .top = {}}};
  const std::vector<Json> e = events(encoder.add(0, held));
  ASSERT_EQ(e.size(), 2U) << "a token whose text is held back still reports its logprob";
  EXPECT_EQ(e[1]["choices"][0]["delta"]["content"], "");
  EXPECT_EQ(e[1]["choices"][0]["logprobs"]["content"][0]["bytes"], Json::array({0xC3}));
  EXPECT_EQ(e[1]["choices"][0]["logprobs"]["content"][0]["top_logprobs"], Json::array());
}

TEST_F(ResponseEncoderTest, EngineErrorIsAnErrorEventNotATruncation) {
  ResponseEncoder encoder(options(ApiEndpoint::kChatCompletions, true, 2), tokenizer_);
  (void)encoder.add(0, delta(0, "partial"));
  StreamOutput failed = final_output(0, "", 4, 1, RequestStatus::kFinishedAborted);
  failed.error = internal_error("the forward pass failed");
  StreamOutput failed1 = failed;
  failed1.index = 1;
  const std::vector<Json> e = events(encoder.add(0, failed) + encoder.add(0, failed1));
  ASSERT_EQ(e.size(), 1U) << "one error event per job";
  EXPECT_EQ(e[0]["error"]["message"], "the forward pass failed");
  EXPECT_EQ(e[0]["error"]["type"], "server_error");
  EXPECT_EQ(e[0]["error"]["code"], 500);
  EXPECT_TRUE(encoder.finished());
  EXPECT_EQ(events(encoder.finish_stream()).back(), "[DONE]");
}

TEST_F(ResponseEncoderTest, EngineErrorMakesTheBodyAnError) {
  ResponseEncoder encoder(options(ApiEndpoint::kCompletions, false), tokenizer_);
  StreamOutput failed = final_output(0, "x", 4, 1, RequestStatus::kFinishedAborted);
  failed.error = Status(StatusCode::kUnavailable, "the engine is shutting down");
  (void)encoder.add(0, failed);
  const EncodedBody body = encoder.finish_body();
  EXPECT_EQ(body.http_status, 503);
  EXPECT_EQ(Json::parse(body.body)["error"]["message"], "the engine is shutting down");
}

TEST_F(ResponseEncoderTest, AbortedRequestsSayAbort) {
  ResponseEncoder encoder(options(ApiEndpoint::kChatCompletions, false), tokenizer_);
  (void)encoder.add(0, final_output(0, "x", 4, 1, RequestStatus::kFinishedAborted));
  EXPECT_EQ(Json::parse(encoder.finish_body().body)["choices"][0]["finish_reason"], "abort");
}

// Echo with logprobs: the prompt's tokens lead the lists, the first with null logprobs (nothing
// conditions it), offsets run through the prompt into the completion.
TEST_F(ResponseEncoderTest, EchoLogprobsPutThePromptFirst) {
  for (const bool stream : {false, true}) {
    ResponseOptions o = options(ApiEndpoint::kCompletions, stream, 1, {3});
    o.echo = true;
    o.echo_texts = {"abc"};
    o.logprobs = 1;
    o.echo_logprobs = true;
    o.first_prompt_tokens = {'a'};
    ResponseEncoder encoder(o, tokenizer_);
    StreamOutput out = final_output(0, "d", 3, 1);
    out.output.prompt_logprobs = {
        {.token_id = 'b', .logprob = -2.0F, .top = {{'x', -0.5F}, {'b', -2.0F}}, .rank = 2},
        {.token_id = 'c', .logprob = -0.25F, .top = {{'c', -0.25F}, {'y', -3.0F}}, .rank = 1}};
    out.output.token_ids = {'d'};
    out.output.logprobs = {{.token_id = 'd', .logprob = -1.5F, .top = {{'e', -1.0F}}}};
    Json lp;
    std::string text;
    if (stream) {
      const std::vector<Json> e = events(encoder.add(0, out) + encoder.finish_stream());
      ASSERT_EQ(e.size(), 2U);
      lp = e[0]["choices"][0]["logprobs"];
      text = e[0]["choices"][0]["text"];
    } else {
      (void)encoder.add(0, out);
      const Json b = Json::parse(encoder.finish_body().body);
      lp = b["choices"][0]["logprobs"];
      text = b["choices"][0]["text"];
    }
    EXPECT_EQ(text, "abcd");
    EXPECT_EQ(lp["tokens"], Json::parse(R"(["a", "b", "c", "d"])"));
    EXPECT_EQ(lp["token_logprobs"], Json::parse(R"([null, -2.0, -0.25, -1.5])"));
    // logprobs 1: the best alternative, plus the token itself when it is not that one.
    EXPECT_EQ(
        lp["top_logprobs"],
        Json::parse(R"([null, {"x": -0.5, "b": -2.0}, {"c": -0.25}, {"e": -1.0, "d": -1.5}])"));
    EXPECT_EQ(lp["text_offset"], Json::parse("[0, 1, 2, 3]"));
  }
}

TEST_F(ResponseEncoderTest, PromptLogprobsInVllmShape) {
  ResponseOptions o = options(ApiEndpoint::kCompletions, false, 1, {2});
  o.prompt_logprobs = 1;
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput out = final_output(0, "z", 2, 1);
  out.output.prompt_logprobs = {
      {.token_id = 'b', .logprob = -2.0F, .top = {{'x', -0.5F}, {'b', -2.0F}}, .rank = 3}};
  (void)encoder.add(0, out);
  const Json choice = Json::parse(encoder.finish_body().body)["choices"][0];
  EXPECT_EQ(choice["prompt_logprobs"], Json::parse(R"([null, {
      "120": {"logprob": -0.5, "rank": 1, "decoded_token": "x"},
      "98": {"logprob": -2.0, "rank": 3, "decoded_token": "b"}}])"));
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_EQ(choice["text"], "z");
}

TEST_F(ResponseEncoderTest, DropGeneratedLeavesThePromptOnly) {
  ResponseOptions o = options(ApiEndpoint::kCompletions, false, 1, {2});
  o.echo = true;
  o.echo_texts = {"ab"};
  o.logprobs = 0;
  o.echo_logprobs = true;
  o.first_prompt_tokens = {'a'};
  o.drop_generated = true;
  ResponseEncoder encoder(o, tokenizer_);
  StreamOutput out = final_output(0, "z", 2, 1, RequestStatus::kFinishedLength);
  out.output.prompt_logprobs = {{.token_id = 'b', .logprob = -2.0F, .top = {}, .rank = 4}};
  out.output.logprobs = {{.token_id = 'z', .logprob = -1.0F, .top = {}}};
  (void)encoder.add(0, out);
  const Json b = Json::parse(encoder.finish_body().body);
  EXPECT_EQ(b["choices"][0]["text"], "ab");
  EXPECT_EQ(b["choices"][0]["logprobs"]["tokens"], Json::parse(R"(["a", "b"])"));
  EXPECT_EQ(b["usage"]["completion_tokens"], 0);
}

}  // namespace
}  // namespace pagoda::api

namespace pagoda::api {
namespace {

ResponseOptions auto_tool_options(bool stream) {
  ResponseOptions o = options(ApiEndpoint::kChatCompletions, stream);
  auto format = tools::make_tool_call_format("hermes");
  EXPECT_TRUE(format.ok());
  o.auto_tool_calls = std::move(*format);
  return o;
}

const char* const kToolOutput =
    "Checking.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
    "</tool_call>";

TEST_F(ResponseEncoderTest, AutoToolCallsBecomeTheMessagesToolCalls) {
  ResponseEncoder encoder(auto_tool_options(false), tokenizer_);
  encoder.add(0, delta(0, std::string(kToolOutput).substr(0, 20)));
  encoder.add(0, final_output(0, std::string(kToolOutput).substr(20), 4, 9));
  const Json body = Json::parse(encoder.finish_body().body);
  const Json& choice = body["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1U);
  const Json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["id"], "call_x0_0");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()),
            Json::parse(R"({"city": "Paris"})"));
}

TEST_F(ResponseEncoderTest, AutoToolCallsWithoutCallsStayText) {
  ResponseEncoder encoder(auto_tool_options(false), tokenizer_);
  encoder.add(0, final_output(0, "No tools: 2 < 3.", 4, 9));
  const Json body = Json::parse(encoder.finish_body().body);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "No tools: 2 < 3.");
  EXPECT_FALSE(body["choices"][0]["message"].contains("tool_calls"));
}

// Streamed a few bytes at a time: the content deltas join to the text before the call, the call
// arrives once, whole, with its index, and the last chunk says tool_calls.
TEST_F(ResponseEncoderTest, AutoToolCallsStreamContentThenTheCall) {
  ResponseEncoder encoder(auto_tool_options(true), tokenizer_);
  const std::string text = kToolOutput;
  std::string sse;
  for (std::size_t at = 0; at < text.size(); at += 3) {
    const bool last = at + 3 >= text.size();
    const std::string piece = text.substr(at, 3);
    sse += encoder.add(0, last ? final_output(0, piece, 4, 9) : delta(0, piece));
  }
  sse += encoder.finish_stream();
  std::string content;
  std::vector<Json> calls;
  Json finish_reason;
  for (const Json& e : events(sse)) {
    if (e == "[DONE]") continue;
    const Json& choice = e["choices"][0];
    if (choice["delta"].contains("content"))
      content += choice["delta"]["content"].get<std::string>();
    if (choice["delta"].contains("tool_calls")) {
      for (const Json& c : choice["delta"]["tool_calls"]) calls.push_back(c);
    }
    if (!choice["finish_reason"].is_null()) finish_reason = choice["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 1U);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(finish_reason, "tool_calls");
}

// With logprobs, each token's entry comes in the chunk of the output that made it, also while
// the text is held back (a half-arrived marker) or goes out as a call; joined, they are the
// unstreamed body's entries, one per token, in order.
TEST_F(ResponseEncoderTest, AutoToolCallsStreamEveryTokensLogprobs) {
  const std::string text = kToolOutput;
  const auto with_logprobs = [](StreamOutput out) {
    for (const std::int32_t id : out.output.token_ids) {
      out.output.logprobs.push_back(
          {.token_id = id, .logprob = -0.25F * static_cast<float>(id % 4), .top = {{id, -0.1F}}});
    }
    return out;
  };
  const auto run = [&](bool stream) {
    ResponseOptions o = auto_tool_options(stream);
    o.logprobs = 1;
    ResponseEncoder encoder(o, tokenizer_);
    std::string sse;
    for (std::size_t at = 0; at < text.size(); at += 3) {
      const bool last = at + 3 >= text.size();
      const std::string piece = text.substr(at, 3);
      sse += encoder.add(0, with_logprobs(last ? final_output(0, piece, 4, 9) : delta(0, piece)));
    }
    return std::pair(std::move(encoder), std::move(sse));
  };
  auto [whole, unused] = run(false);
  const Json body = Json::parse(whole.finish_body().body);
  const Json& expected = body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(expected.size(), text.size());

  auto [streamed, sse] = run(true);
  Json joined = Json::array();
  bool call_chunk_had_logprobs = false;
  for (const Json& e : events(sse)) {
    const Json& choice = e["choices"][0];
    if (choice["logprobs"].is_null()) continue;
    for (const Json& entry : choice["logprobs"]["content"]) joined.push_back(entry);
    if (choice["delta"].contains("tool_calls")) call_chunk_had_logprobs = true;
  }
  EXPECT_EQ(joined, expected);
  EXPECT_TRUE(call_chunk_had_logprobs);
}

}  // namespace
}  // namespace pagoda::api
