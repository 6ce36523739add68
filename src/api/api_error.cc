#include "api/api_error.h"

namespace pagoda::api {

std::string_view openai_error_type(int http_status) {
  switch (http_status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: break;
  }
  return http_status >= 500 ? "server_error" : "invalid_request_error";
}

ApiError ApiError::invalid_request(std::string message, std::optional<std::string> param) {
  return {.code = StatusCode::kInvalidArgument,
          .http_status = 400,
          .type = "invalid_request_error",
          .message = std::move(message),
          .param = std::move(param)};
}

ApiError ApiError::model_not_found(std::string_view model) {
  return {.code = StatusCode::kNotFound,
          .http_status = 404,
          .type = std::string(openai_error_type(404)),
          .message = "The model `" + std::string(model) + "` does not exist.",
          .param = "model"};
}

ApiError ApiError::payload_too_large(std::optional<std::int64_t> size_bytes,
                                     std::int64_t limit_bytes) {
  const std::string size = size_bytes ? std::to_string(*size_bytes) + " bytes" : "over the limit";
  return {.code = StatusCode::kResourceExhausted,
          .http_status = 413,
          .type = "invalid_request_error",
          .message = "the request body is " + size + "; at most " + std::to_string(limit_bytes) +
                     " bytes are accepted",
          .param = std::nullopt};
}

ApiError ApiError::from_status(const Status& status, std::optional<std::string> param) {
  const int http = status_code_http(status.code());
  return {.code = status.code(),
          .http_status = http,
          .type = std::string(openai_error_type(http)),
          .message = status.message(),
          .param = std::move(param)};
}

Json ApiError::to_json() const {
  Json error = {{"message", message}, {"type", type}};
  error["param"] = param ? Json(*param) : Json(nullptr);
  error["code"] = http_status;
  return {{"error", std::move(error)}};
}

std::string ApiError::body() const {
  // Replace keeps a message with a stray byte (echoed client input) from throwing.
  return to_json().dump(-1, ' ', false, Json::error_handler_t::replace);
}

Status ApiError::to_status() const {
  return {code, param ? *param + ": " + message : message};
}

}  // namespace pagoda::api
