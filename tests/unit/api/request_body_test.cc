#include "api/request_body.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <string>

namespace pagoda::api {
namespace {

TEST(RequestBodyTest, ParsesAnObjectKeepingKeyOrder) {
  auto body = parse_request_body(R"({"z": 1, "a": [true, null], "m": {"k": "v"}})");
  ASSERT_TRUE(body.ok()) << body.error().message;
  EXPECT_EQ(body->begin().key(), "z");
  EXPECT_EQ((*body)["m"]["k"], "v");
}

TEST(RequestBodyTest, InvalidUtf8NamesTheByteOffset) {
  auto body = parse_request_body("{\"model\": \"ab\xC3(\"}");
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.error().http_status, 400);
  EXPECT_EQ(body.error().type, "invalid_request_error");
  EXPECT_NE(body.error().message.find("UTF-8"), std::string::npos);
  EXPECT_NE(body.error().message.find("at 13"), std::string::npos) << body.error().message;
}

TEST(RequestBodyTest, TruncatedJsonSaysWhere) {
  auto body = parse_request_body(R"({"messages": [{"role": "user")");
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.error().http_status, 400);
  EXPECT_NE(body.error().message.find("not valid JSON"), std::string::npos);
  EXPECT_NE(body.error().message.find("column"), std::string::npos) << body.error().message;
  EXPECT_EQ(body.error().message.find("json.exception"), std::string::npos);
}

TEST(RequestBodyTest, EmptyBodyIsMalformed) {
  auto body = parse_request_body("");
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(body.error().http_status, 400);
}

TEST(RequestBodyTest, TopLevelMustBeAnObject) {
  for (const char* text : {"[1, 2]", "\"text\"", "42", "null"}) {
    auto body = parse_request_body(text);
    ASSERT_FALSE(body.ok()) << text;
    EXPECT_NE(body.error().message.find("must be a JSON object"), std::string::npos) << text;
  }
}

TEST(RequestBodyTest, NestingIsBounded) {
  const auto nested = [](int depth) {
    return "{\"a\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  };
  EXPECT_TRUE(parse_request_body(nested(kMaxJsonDepth - 2)).ok());
  auto deep = parse_request_body(nested(100000));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("deeper than"), std::string::npos) << deep.error().message;
}

// An object with `num_keys` keys "0", "1", ... whose values are their own indices.
std::string object_text(std::int64_t num_keys) {
  std::string text = "{";
  for (std::int64_t i = 0; i < num_keys; ++i) {
    if (i > 0) text += ',';
    text += "\"" + std::to_string(i) + "\":" + std::to_string(i);
  }
  return text + "}";
}

// An array of `num_values` zeros.
std::string array_text(std::int64_t num_values) {
  std::string text = "[";
  for (std::int64_t i = 0; i < num_values; ++i) text += i > 0 ? ",0" : "0";
  return text + "]";
}

// These sizes took seconds each when every key was looked up in its object as it was parsed
// (quadratic); they parse in milliseconds now. The time is measured in bench/api
// (docs/perf/http.md); here the point is that they are accepted and built right.
TEST(RequestBodyTest, LargeObjectsAreBuiltInOrder) {
  for (const std::int64_t n : {std::int64_t{50'000}, std::int64_t{49'152}}) {
    auto body = parse_request_body("{\"model\": \"m\", \"logit_bias\": " + object_text(n) + "}");
    ASSERT_TRUE(body.ok()) << body.error().message;
    const Json& bias = (*body)["logit_bias"];
    ASSERT_EQ(bias.size(), static_cast<std::size_t>(n));
    std::int64_t i = 0;
    for (const auto& [key, value] : bias.items()) {
      ASSERT_EQ(key, std::to_string(i));
      ASSERT_EQ(value, i);
      ++i;
    }
    EXPECT_EQ(bias.find("49151").value(), 49151);
  }
}

// Issue 26's check: a 50k-key unknown field (the report's 623 KiB body) and a 49,152-key
// logit_bias each parse in under 50 ms (quadratic parsing took 6.4-6.8 s). The best of five
// runs is timed, so that a shared machine's noise does not decide; unoptimized and sanitizer
// builds only check the answers (the bound is for the released build).
TEST(RequestBodyTest, IssueSizedObjectsParseUnder50Milliseconds) {
  std::string unknown = "{\"model\": \"m\", \"unknown_field\": {";
  for (int i = 0; i < 50'000; ++i) {
    unknown += (i ? ", \"" : "\"") + std::string("k") + std::to_string(i) + "\": 1";
  }
  unknown += "}}";
  const std::string bias = "{\"model\": \"m\", \"logit_bias\": " + object_text(49'152) + "}";
  for (const std::string* body : std::array<const std::string*, 2>{&unknown, &bias}) {
    double best = 1e9;
    for (int run = 0; run < 5; ++run) {
      const auto start = std::chrono::steady_clock::now();
      auto parsed = parse_request_body(*body);
      best = std::min(
          best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    }
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    EXPECT_LT(best, 0.050) << body->size() << " bytes";
#endif
  }
}

TEST(RequestBodyTest, DuplicateKeysKeepTheFirstPlaceAndTheLastValue) {
  // A small object (scanned) and a large one (indexed) behave alike, and as nlohmann's parser.
  for (const std::int64_t n : {std::int64_t{3}, std::int64_t{100}}) {
    std::string text = object_text(n);
    text.pop_back();
    text += ",\"1\":\"again\",\"z\":true,\"1\":\"last\"}";
    auto body = parse_request_body(text);
    ASSERT_TRUE(body.ok()) << body.error().message;
    EXPECT_EQ(body->size(), static_cast<std::size_t>(n + 1));
    EXPECT_EQ(std::next(body->begin()).key(), "1");
    EXPECT_EQ((*body)["1"], "last");
    EXPECT_EQ(body->back(), true);
    EXPECT_EQ(*body, Json::parse(text)) << n;
  }
}

TEST(RequestBodyTest, KeysPerObjectAreBounded) {
  auto full = parse_request_body("{\"logit_bias\": " + object_text(kMaxJsonObjectKeys) + "}");
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ((*full)["logit_bias"].size(), static_cast<std::size_t>(kMaxJsonObjectKeys));

  auto over = parse_request_body("{\"logit_bias\": " + object_text(kMaxJsonObjectKeys + 1) + "}");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().http_status, 400);
  EXPECT_EQ(over.error().type, "invalid_request_error");
  EXPECT_EQ(over.error().param, "logit_bias");
  EXPECT_EQ(over.error().message, "'logit_bias' has more than 262144 keys");

  // Nested objects are named by their path; the top level has no name.
  auto nested = parse_request_body("{\"messages\": [{}, {\"role\": \"user\", \"x\": {\"y\": " +
                                   object_text(kMaxJsonObjectKeys + 1) + "}}]}");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.error().param, "messages[1].x.y");
  auto top = parse_request_body(object_text(kMaxJsonObjectKeys + 1));
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().param, std::nullopt);
  EXPECT_EQ(top.error().message, "the request body has more than 262144 keys");
}

TEST(RequestBodyTest, ValuesPerBodyAreBounded) {
  // The top-level object and the array count as values too.
  auto full = parse_request_body("{\"prompt\": " + array_text(kMaxJsonValues - 2) + "}");
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ((*full)["prompt"].size(), static_cast<std::size_t>(kMaxJsonValues - 2));

  auto over = parse_request_body("{\"prompt\": " + array_text(kMaxJsonValues - 1) + "}");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().http_status, 400);
  EXPECT_EQ(over.error().param, "prompt");
  EXPECT_EQ(over.error().message,
            "'prompt' takes the request body over 1048576 JSON values (each number, string, "
            "boolean, null, array and object counts one)");

  // Counted over the whole body, not per array.
  auto spread = parse_request_body("{\"prompt\": [" + array_text(kMaxJsonValues / 2) + ", " +
                                   array_text(kMaxJsonValues / 2) + "]}");
  ASSERT_FALSE(spread.ok());
  EXPECT_EQ(spread.error().param, "prompt[1]");
}

TEST(ApiErrorTest, BodyHasOpenAisShape) {
  const ApiError error = ApiError::invalid_request("'n' must be at least 1, got 0", "n");
  const Json body = Json::parse(error.body());
  EXPECT_EQ(body, Json::parse(R"({"error": {"message": "'n' must be at least 1, got 0",
      "type": "invalid_request_error", "param": "n", "code": 400}})"));
  EXPECT_TRUE(Json::parse(ApiError::invalid_request("x").body())["error"]["param"].is_null());
}

TEST(ApiErrorTest, StatusCodesMapToHttpAndTypes) {
  struct Case {
    StatusCode code;
    int http;
    const char* type;
  };
  for (const Case& c : {Case{StatusCode::kInvalidArgument, 400, "invalid_request_error"},
                        Case{StatusCode::kNotFound, 404, "not_found_error"},
                        Case{StatusCode::kUnauthenticated, 401, "authentication_error"},
                        Case{StatusCode::kResourceExhausted, 429, "rate_limit_error"},
                        Case{StatusCode::kUnavailable, 503, "server_error"},
                        Case{StatusCode::kInternal, 500, "server_error"}}) {
    const ApiError error = ApiError::from_status(Status(c.code, "why"));
    EXPECT_EQ(error.http_status, c.http) << status_code_name(c.code);
    EXPECT_EQ(error.type, c.type) << status_code_name(c.code);
    EXPECT_EQ(error.code, c.code);
    EXPECT_EQ(error.to_status().code(), c.code);
  }
  EXPECT_EQ(ApiError::model_not_found("x").http_status, 404);
  EXPECT_EQ(ApiError::payload_too_large(10, 5).http_status, 413);
  EXPECT_EQ(ApiError::payload_too_large(10, 5).message,
            "the request body is 10 bytes; at most 5 bytes are accepted");
  EXPECT_EQ(ApiError::payload_too_large(std::nullopt, 5).message,
            "the request body is over the limit; at most 5 bytes are accepted");
}

}  // namespace
}  // namespace pagoda::api
