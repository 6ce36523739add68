// Typed reads of a request object's optional fields, each error naming the parameter. null
// counts as absent (clients send null for unset fields); the first error is kept and every
// later read returns nothing, so a parser reads all its fields and checks error() once.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "api/api_error.h"

namespace pagoda::api {

/// Reads fields of one JSON object; `prefix` ("messages[2].") is put before each param name.
class RequestFields {
 public:
  explicit RequestFields(const Json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  /// The field's value, or nullptr when absent or null.
  const Json* find(std::string_view key) const;

  std::optional<bool> boolean(std::string_view key);
  /// A JSON number; integral floats and integers alike.
  std::optional<double> number(std::string_view key);
  /// A number within [lo, hi] (finite).
  std::optional<double> number_in(std::string_view key, double lo, double hi);
  /// A whole number within [lo, hi]; 3.0 counts as 3, 3.5 does not.
  std::optional<std::int64_t> integer(std::string_view key,
                                      std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                      std::int64_t hi = std::numeric_limits<std::int64_t>::max());
  std::optional<std::string> string(std::string_view key);
  /// An array (nullptr when absent or after an error).
  const Json* array(std::string_view key);
  /// An object (nullptr when absent or after an error).
  const Json* object(std::string_view key);

  /// Records an error about `key` unless one is already recorded.
  void fail(std::string_view key, std::string message);
  /// Records `error` unless one is already recorded.
  void fail(ApiError error) {
    if (!error_) error_ = std::move(error);
  }
  /// The full param name of `key` ("messages[2].role").
  std::string param(std::string_view key) const { return prefix_ + std::string(key); }

  /// The first error, if any read failed.
  const std::optional<ApiError>& error() const { return error_; }
  bool ok() const { return !error_.has_value(); }

 private:
  const Json* typed(std::string_view key, bool (*is_type)(const Json&), std::string_view expected);

  const Json& object_;
  std::string prefix_;
  std::optional<ApiError> error_;
};

/// JSON type names as a client would say them ("string", "number", "array", ...).
std::string json_type_name(const Json& value);

/// A whole number's value, if `value` is one that fits in int64.
std::optional<std::int64_t> json_integer(const Json& value);

/// Formats a double for an error message without trailing zeros ("0.5", "3", "1e+30").
std::string format_number(double value);

}  // namespace pagoda::api
