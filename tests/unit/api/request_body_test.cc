#include "api/request_body.h"

#include <gtest/gtest.h>

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
