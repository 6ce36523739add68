// Status and StatusOr: the error tier for untrusted input (requests, model files, templates).
// Every code maps 1:1 to an HTTP status and a gRPC code (see status_code_http / status_code_grpc),
// so a frontend never invents its own mapping. Broken internal invariants use PAGODA_CHECK instead.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace pagoda {

/// Error categories; the numeric values equal the gRPC status codes.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kCancelled = 1,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

/// The HTTP status a frontend returns for this code.
int status_code_http(StatusCode code);
/// Short lowercase name ("invalid_argument"), used in logs and OpenAI-shaped error bodies.
std::string_view status_code_name(StatusCode code);

/// An error code with a message that tells the user how to fix the problem.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "invalid_argument: <message>".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status not_found(std::string message) {
  return {StatusCode::kNotFound, std::move(message)};
}
inline Status data_loss(std::string message) {
  return {StatusCode::kDataLoss, std::move(message)};
}
inline Status unimplemented(std::string message) {
  return {StatusCode::kUnimplemented, std::move(message)};
}
inline Status out_of_range(std::string message) {
  return {StatusCode::kOutOfRange, std::move(message)};
}
inline Status internal_error(std::string message) {
  return {StatusCode::kInternal, std::move(message)};
}

/// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace pagoda

/// Returns the Status of `expr` from the enclosing function when it is not ok.
#define PAGODA_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::pagoda::Status pagoda_status_ = (expr);        \
    if (!pagoda_status_.ok()) return pagoda_status_; \
  } while (0)

#define PAGODA_CONCAT_INNER_(a, b) a##b
#define PAGODA_CONCAT_(a, b) PAGODA_CONCAT_INNER_(a, b)

/// `PAGODA_ASSIGN_OR_RETURN(auto x, f());` declares x from a StatusOr or returns its Status.
#define PAGODA_ASSIGN_OR_RETURN(lhs, expr) \
  PAGODA_ASSIGN_OR_RETURN_IMPL_(PAGODA_CONCAT_(pagoda_statusor_, __LINE__), lhs, expr)
#define PAGODA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
