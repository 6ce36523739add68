#include "api/request_body.h"

#include <string>

#include "tokenizer/utf8.h"

namespace pagoda::api {

namespace {

// Offset of the first byte that is not part of a valid UTF-8 sequence.
std::size_t first_invalid_utf8(std::string_view bytes) {
  std::size_t lo = 0;
  const std::size_t hi = bytes.size();
  while (lo < hi) {
    const std::size_t len = utf8_char_length(static_cast<unsigned char>(bytes[lo]));
    if (lo + len > hi || !is_valid_utf8(bytes.substr(lo, len))) return lo;
    lo += len;
  }
  return hi;
}

struct TooDeep {};

}  // namespace

ApiErrorOr<Json> parse_request_body(std::string_view body) {
  if (!is_valid_utf8(body)) {
    return ApiError::invalid_request("the request body is not valid UTF-8 (first bad byte at " +
                                     std::to_string(first_invalid_utf8(body)) + ")");
  }
  Json parsed;
  try {
    parsed = Json::parse(body, [](int depth, Json::parse_event_t event, Json&) {
      if ((event == Json::parse_event_t::object_start ||
           event == Json::parse_event_t::array_start) &&
          depth >= kMaxJsonDepth) {
        throw TooDeep{};
      }
      return true;
    });
  } catch (const TooDeep&) {
    return ApiError::invalid_request("the request body nests arrays and objects deeper than " +
                                     std::to_string(kMaxJsonDepth) + " levels");
  } catch (const Json::exception& e) {
    // parse_error (syntax) or out_of_range (a number too large for a double). what() starts with
    // "[json.exception.parse_error.101] "; the rest says where and why.
    std::string_view what = e.what();
    if (const auto end = what.find("] "); what.starts_with('[') && end != what.npos) {
      what.remove_prefix(end + 2);
    }
    return ApiError::invalid_request("the request body is not valid JSON: " + std::string(what));
  }
  if (!parsed.is_object()) {
    return ApiError::invalid_request(std::string("the request body must be a JSON object, got ") +
                                     parsed.type_name());
  }
  return parsed;
}

}  // namespace pagoda::api
