// The first check of every request body, shared by all endpoints: valid UTF-8, well-formed JSON,
// bounded nesting, an object at the top. Everything after works on the parsed Json.
#pragma once

#include <string_view>

#include "api/api_error.h"

namespace pagoda::api {

/// Deepest nesting of arrays and objects a body may have; deeper bodies are refused before they
/// reach a chat template.
inline constexpr int kMaxJsonDepth = 64;

/// Parses a request body. 400 invalid_request_error for invalid UTF-8 (with the byte offset),
/// malformed or truncated JSON (with the parser's position), nesting over kMaxJsonDepth, or a
/// top level that is not an object.
ApiErrorOr<Json> parse_request_body(std::string_view body);

}  // namespace pagoda::api
