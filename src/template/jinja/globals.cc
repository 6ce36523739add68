#include "template/jinja/globals.h"

#include <ctime>

#include "template/jinja/evaluator.h"

namespace pagoda::jinja {
namespace {

// jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr std::int64_t kMaxRange = 100000;

StatusOr<Value> range(Evaluator&, CallArgs args) {
  if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3) {
    return invalid_argument("TypeError: range expected 1 to 3 integer arguments");
  }
  for (const Value& v : args.positional) {
    if (!v.is_integral())
      return invalid_argument("TypeError: '" + v.type_name() +
                              "' object cannot be interpreted as an integer");
  }
  std::int64_t start = 0;
  std::int64_t stop = 0;
  std::int64_t step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() == 3) step = args.positional[2].as_int();
  }
  if (step == 0) return invalid_argument("ValueError: range() arg 3 must not be zero");
  std::vector<Value> items;
  for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<std::int64_t>(items.size()) >= kMaxRange) {
      return out_of_range(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.emplace_back(i);
  }
  return Value::list(std::move(items));
}

StatusOr<Value> dict(Evaluator&, CallArgs args) {
  Dict out;
  if (args.positional.size() > 1)
    return invalid_argument("TypeError: dict expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      out = source.as_dict();
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list().items) {
        if (!pair.is_list() || pair.as_list().items.size() != 2) {
          return invalid_argument(
              "ValueError: dictionary update sequence element has the wrong length");
        }
        out.set(pair.as_list().items[0], pair.as_list().items[1]);
      }
    } else {
      return invalid_argument("TypeError: '" + source.type_name() + "' object is not iterable");
    }
  }
  for (auto& [key, value] : args.keyword) out.set(Value(key), std::move(value));
  return Value::dict(std::move(out));
}

StatusOr<Value> make_namespace(Evaluator& ev, CallArgs args) {
  PAGODA_ASSIGN_OR_RETURN(Value attrs, dict(ev, std::move(args)));
  auto ns = std::make_shared<Namespace>();
  for (const auto& [key, value] : attrs.as_dict().entries) {
    if (key.is_string() && key.as_string().starts_with("_")) {
      return invalid_argument(
          "Chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
          key.repr() + ". Please rename the attribute.");
    }
  }
  ns->attrs = attrs.as_dict();
  return Value(std::move(ns));
}

StatusOr<Value> raise_exception(Evaluator&, CallArgs args) {
  std::string message = args.positional.empty() ? "" : args.positional[0].str();
  return invalid_argument(message);
}

StatusOr<Value> strftime_now(Evaluator& ev, CallArgs args) {
  if (args.positional.size() != 1 || !args.positional[0].is_string()) {
    return invalid_argument("TypeError: strftime_now() takes one format string");
  }
  std::tm now{};
  if (ev.options().now) {
    now = *ev.options().now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &now);
  }
  const std::string& format = args.positional[0].as_string();
  if (format.empty()) return Value("");
  std::string out(256 + format.size() * 8, '\0');
  std::size_t n = std::strftime(out.data(), out.size(), format.c_str(), &now);
  out.resize(n);
  return Value(std::move(out));
}

}  // namespace

std::vector<std::pair<std::string, Value>> builtin_globals() {
  return {
      {"range", Value::callable("range", range)},
      {"dict", Value::callable("dict", dict)},
      {"namespace", Value::callable("namespace", make_namespace)},
      {"raise_exception", Value::callable("raise_exception", raise_exception)},
      {"strftime_now", Value::callable("strftime_now", strftime_now)},
  };
}

}  // namespace pagoda::jinja
