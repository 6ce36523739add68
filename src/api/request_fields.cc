#include "api/request_fields.h"

#include <charconv>
#include <cmath>

namespace pagoda::api {

std::string json_type_name(const Json& value) {
  if (value.is_number()) return "number";
  if (value.is_boolean()) return "boolean";
  return value.type_name();
}

std::optional<std::int64_t> json_integer(const Json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<std::int64_t>();
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return {};
    return static_cast<std::int64_t>(u);
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    // 2^63 itself does not fit; every double below it that is whole does.
    if (std::isfinite(d) && d == std::floor(d) && d >= -9.223372036854775808e18 &&
        d < 9.223372036854775808e18) {
      return static_cast<std::int64_t>(d);
    }
  }
  return {};
}

std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

const Json* RequestFields::find(std::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void RequestFields::fail(std::string_view key, std::string message) {
  if (!error_) error_ = ApiError::invalid_request(std::move(message), param(key));
}

const Json* RequestFields::typed(std::string_view key, bool (*is_type)(const Json&),
                                 std::string_view expected) {
  if (error_) return nullptr;
  const Json* value = find(key);
  if (value == nullptr) return nullptr;
  if (!is_type(*value)) {
    fail(key, "'" + param(key) + "' must be " + std::string(expected) + ", got " +
                  json_type_name(*value));
    return nullptr;
  }
  return value;
}

std::optional<bool> RequestFields::boolean(std::string_view key) {
  const Json* v = typed(
      key, [](const Json& j) { return j.is_boolean(); }, "a boolean");
  if (v == nullptr) return {};
  return v->get<bool>();
}

std::optional<double> RequestFields::number(std::string_view key) {
  const Json* v = typed(
      key, [](const Json& j) { return j.is_number(); }, "a number");
  if (v == nullptr) return {};
  return v->get<double>();
}

std::optional<double> RequestFields::number_in(std::string_view key, double lo, double hi) {
  const std::optional<double> v = number(key);
  if (!v) return {};
  if (!(*v >= lo && *v <= hi)) {
    fail(key, "'" + param(key) + "' must be in [" + format_number(lo) + ", " + format_number(hi) +
                  "], got " + format_number(*v));
    return {};
  }
  return v;
}

std::optional<std::int64_t> RequestFields::integer(std::string_view key, std::int64_t lo,
                                                   std::int64_t hi) {
  const Json* v = typed(
      key, [](const Json& j) { return j.is_number(); }, "an integer");
  if (v == nullptr) return {};
  const std::optional<std::int64_t> i = json_integer(*v);
  if (!i) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d)) {
      fail(key, "'" + param(key) + "' is " + format_number(d) + ", too large for an integer");
    } else {
      fail(key, "'" + param(key) + "' must be an integer, got " + v->dump());
    }
    return {};
  }
  if (*i < lo) {
    fail(key, "'" + param(key) + "' must be at least " + std::to_string(lo) + ", got " +
                  std::to_string(*i));
    return {};
  }
  if (*i > hi) {
    fail(key, "'" + param(key) + "' must be at most " + std::to_string(hi) + ", got " +
                  std::to_string(*i));
    return {};
  }
  return i;
}

std::optional<std::string> RequestFields::string(std::string_view key) {
  const Json* v = typed(
      key, [](const Json& j) { return j.is_string(); }, "a string");
  if (v == nullptr) return {};
  return v->get<std::string>();
}

const Json* RequestFields::array(std::string_view key) {
  return typed(
      key, [](const Json& j) { return j.is_array(); }, "an array");
}

const Json* RequestFields::object(std::string_view key) {
  return typed(
      key, [](const Json& j) { return j.is_object(); }, "an object");
}

}  // namespace pagoda::api
