// The error value of the OpenAI protocol layer: what went wrong, which HTTP status and OpenAI
// error type it is, and which request parameter caused it. Transport independent: the HTTP
// server writes `body()` with `http_status`; the gRPC server maps `code` to a gRPC status.
//
//   {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature",
//              "code": 400}}
//
// `code` carries the numeric HTTP status, as vLLM does; the official clients read only
// message/type/param.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "pagoda/status.h"

namespace pagoda::api {

/// JSON with keys kept in insertion order, so responses read like OpenAI's and chat templates'
/// tojson sees the client's key order.
using Json = nlohmann::ordered_json;

/// One failed request, ready to be written by any transport.
struct ApiError {
  /// The Status code it corresponds to (gRPC frontends use it directly).
  StatusCode code = StatusCode::kInvalidArgument;
  /// HTTP status: status_code_http(code) unless a transport-specific one was set (413).
  int http_status = 400;
  /// OpenAI error type: "invalid_request_error", "authentication_error", "not_found_error",
  /// "rate_limit_error", "server_error", ...
  std::string type = "invalid_request_error";
  /// Says what is wrong and, where it helps, how to fix it.
  std::string message;
  /// The request parameter at fault ("temperature", "messages[1].role"), if one is.
  std::optional<std::string> param;

  /// A 400 invalid_request_error naming `param`.
  static ApiError invalid_request(std::string message,
                                  std::optional<std::string> param = std::nullopt);
  /// A 404 for a model this server does not serve (param "model").
  static ApiError model_not_found(std::string_view model);
  /// A 413 for a body over the transport's limit; `size_bytes` when the request declared it.
  static ApiError payload_too_large(std::optional<std::int64_t> size_bytes,
                                    std::int64_t limit_bytes);
  /// The error for a Status from the engine or a loader; `status` must not be ok.
  static ApiError from_status(const Status& status,
                              std::optional<std::string> param = std::nullopt);

  /// {"error": {"message", "type", "param", "code"}}.
  Json to_json() const;
  /// to_json() serialized.
  std::string body() const;
  /// The matching Status (message prefixed with the param when there is one).
  Status to_status() const;
};

/// OpenAI's error type for an HTTP status.
std::string_view openai_error_type(int http_status);

/// A value or the ApiError that explains why there is none (StatusOr's shape).
template <typename T>
class [[nodiscard]] ApiErrorOr {
 public:
  ApiErrorOr(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  ApiErrorOr(ApiError error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  /// The error; only when !ok().
  const ApiError& error() const { return std::get<ApiError>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace pagoda::api

/// `PAGODA_API_ASSIGN_OR_RETURN(auto x, f());` declares x from an ApiErrorOr or returns its error.
#define PAGODA_API_ASSIGN_OR_RETURN(lhs, expr) \
  PAGODA_API_ASSIGN_OR_RETURN_IMPL_(PAGODA_CONCAT_(pagoda_api_or_, __LINE__), lhs, expr)
#define PAGODA_API_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  if (!tmp.ok()) return tmp.error();                      \
  lhs = std::move(tmp).value()

/// Returns the error of an std::optional<ApiError> from the enclosing function when it is set.
#define PAGODA_API_RETURN_IF_ERROR(expr)                           \
  do {                                                             \
    std::optional<::pagoda::api::ApiError> pagoda_api_e_ = (expr); \
    if (pagoda_api_e_) return *std::move(pagoda_api_e_);           \
  } while (0)
