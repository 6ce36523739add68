// The first check of every request body, shared by all endpoints: valid UTF-8, well-formed JSON,
// bounded nesting, keys and values, an object at the top. Everything after works on the parsed
// Json.
//
// Parsing takes time linear in the body's size: keys are appended to their object rather than
// looked up one by one (nlohmann's ordered_json parser searches the object for every key, which
// made a 50k-key object cost seconds), and the limits stop a hostile body before it is built.
#pragma once

#include <cstdint>
#include <string_view>

#include "api/api_error.h"

namespace pagoda::api {

/// Deepest nesting of arrays and objects a body may have; deeper bodies are refused before they
/// reach a chat template.
inline constexpr int kMaxJsonDepth = 64;

/// Most keys one object may have: 2^18, the largest vocabulary served (Gemma 3: 262,144 tokens),
/// so a logit_bias over every token is still accepted.
inline constexpr std::int64_t kMaxJsonObjectKeys = std::int64_t{1} << 18;

/// Most values (numbers, strings, booleans, nulls, arrays, objects) a body may hold: 2^20. A
/// body near the 8 MiB limit could otherwise hold 4 million, about 30 times its size in memory.
inline constexpr std::int64_t kMaxJsonValues = std::int64_t{1} << 20;

/// Parses a request body. 400 invalid_request_error for invalid UTF-8 (with the byte offset),
/// malformed or truncated JSON (with the parser's position), nesting over kMaxJsonDepth, an
/// object over kMaxJsonObjectKeys or a body over kMaxJsonValues (param: the object or array
/// being filled when the limit was crossed, "logit_bias", "messages[2].content"), or a top
/// level that is not an object.
/// Duplicate keys keep the first key's place and the last value, as nlohmann's parser does.
ApiErrorOr<Json> parse_request_body(std::string_view body);

}  // namespace pagoda::api
