#include "template/jinja/operators.h"

#include <cmath>
#include <string>

#include "template/jinja/access.h"

namespace pagoda::jinja {
namespace {

Status type_error(std::string_view op, const Value& a, const Value& b) {
  return invalid_argument("TypeError: unsupported operand type(s) for " + std::string(op) + ": '" +
                          a.type_name() + "' and '" + b.type_name() + "'");
}

Status too_large(std::size_t max_size) {
  return out_of_range("template value larger than the output limit of " + std::to_string(max_size) +
                      " bytes");
}

StatusOr<Value> repeat(const Value& seq, std::int64_t times, std::size_t max_size) {
  std::size_t n = times > 0 ? static_cast<std::size_t>(times) : 0;
  if (seq.is_string()) {
    if (n > 0 && seq.as_string().size() > max_size / n) return too_large(max_size);
    std::string out;
    for (std::size_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  if (n > 0 && seq.as_list().items.size() > max_size / n) return too_large(max_size);
  std::vector<Value> out;
  for (std::size_t i = 0; i < n; ++i) {
    out.insert(out.end(), seq.as_list().items.begin(), seq.as_list().items.end());
  }
  return Value::list(std::move(out), seq.as_list().is_tuple);
}

// %-formatting of strings ("%s" % x), the subset templates use: %s %d %i %r %f %%.
StatusOr<Value> percent_format(const std::string& fmt, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.as_list().is_tuple) {
    values = args.as_list().items;
  } else {
    values.push_back(args);
  }
  std::string out;
  std::size_t next = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) return invalid_argument("ValueError: incomplete format");
    char spec = fmt[i];
    if (spec == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size())
      return invalid_argument("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    if (spec == 's') {
      out += v.str();
    } else if (spec == 'r') {
      out += v.repr();
    } else if ((spec == 'd' || spec == 'i') && v.is_number()) {
      out += std::to_string(static_cast<std::int64_t>(v.as_double()));
    } else if (spec == 'f' && v.is_number()) {
      out += std::to_string(v.as_double());
    } else {
      return invalid_argument(std::string("TypeError: unsupported format character '") + spec +
                              "'");
    }
  }
  if (next < values.size())
    return invalid_argument("TypeError: not all arguments converted during string formatting");
  return Value(std::move(out));
}

StatusOr<Value> arithmetic(std::string_view op, const Value& a, const Value& b) {
  bool floats = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
  if (op == "/") {
    if (b.as_double() == 0.0) return invalid_argument("ZeroDivisionError: division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (floats) {
    double x = a.as_double();
    double y = b.as_double();
    if (op == "+") return Value(x + y);
    if (op == "-") return Value(x - y);
    if (op == "*") return Value(x * y);
    if (op == "**") return Value(std::pow(x, y));
    if (y == 0.0) return invalid_argument("ZeroDivisionError: float modulo");
    double floor_div = std::floor(x / y);
    if (op == "//") return Value(floor_div);
    double mod = std::fmod(x, y);
    if (mod != 0.0 && ((mod < 0) != (y < 0))) mod += y;
    return Value(mod);
  }
  std::int64_t x = a.as_int();
  std::int64_t y = b.as_int();
  std::int64_t r = 0;
  Status overflow = out_of_range("integer overflow in template arithmetic");
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return overflow;
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return overflow;
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return overflow;
    return Value(r);
  }
  if (op == "**") {
    if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (std::int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(r, x, &r)) return overflow;
      if (r == 0 || r == 1) break;
    }
    return Value(r);
  }
  if (y == 0) return invalid_argument("ZeroDivisionError: integer division or modulo by zero");
  std::int64_t q = x / y;
  std::int64_t m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  return Value(op == "//" ? q : m);
}

}  // namespace

StatusOr<Value> binary_op(std::string_view op, const Value& a, const Value& b,
                          std::size_t max_size) {
  if (op == "~") {
    std::string out = a.str();
    out += b.str();
    if (out.size() > max_size) return too_large(max_size);
    return Value(std::move(out));
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == "+" && a.is_string() && b.is_string()) {
    if (a.as_string().size() + b.as_string().size() > max_size) return too_large(max_size);
    return Value(a.as_string() + b.as_string());
  }
  if (op == "+" && a.is_list() && b.is_list() && a.as_list().is_tuple == b.as_list().is_tuple) {
    std::vector<Value> items = a.as_list().items;
    items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
    return Value::list(std::move(items), a.as_list().is_tuple);
  }
  if (op == "+" && a.is_string()) {
    return invalid_argument("TypeError: can only concatenate str (not \"" + b.type_name() +
                            "\") to str");
  }
  if (op == "+" && a.is_list()) {
    return invalid_argument("TypeError: can only concatenate " + a.type_name() + " (not \"" +
                            b.type_name() + "\") to " + a.type_name());
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_integral())
    return repeat(a, b.as_int(), max_size);
  if (op == "*" && (b.is_string() || b.is_list()) && a.is_integral())
    return repeat(b, a.as_int(), max_size);
  if (op == "%" && a.is_string()) return percent_format(a.as_string(), b);
  return type_error(op, a, b);
}

StatusOr<bool> contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kString:
      if (!needle.is_string()) {
        return invalid_argument("TypeError: 'in <string>' requires string as left operand, not " +
                                needle.type_name());
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& item : haystack.as_list().items) {
        if (values_equal(item, needle)) return true;
      }
      return false;
    case Value::Kind::kDict: return haystack.as_dict().find(needle) != nullptr;
    case Value::Kind::kUndefined: return false;
    default:
      return invalid_argument("TypeError: argument of type '" + haystack.type_name() +
                              "' is not iterable");
  }
}

StatusOr<bool> compare_op(std::string_view op, const Value& a, const Value& b) {
  if (op == "==") return values_equal(a, b);
  if (op == "!=") return !values_equal(a, b);
  if (op == "in") return contains(b, a);
  if (op == "not in") {
    PAGODA_ASSIGN_OR_RETURN(bool found, contains(b, a));
    return !found;
  }
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  if (op == "<") return value_less(a, b);
  if (op == ">") return value_less(b, a);
  if (op == "<=") {
    PAGODA_ASSIGN_OR_RETURN(bool greater, value_less(b, a));
    return !greater;
  }
  PAGODA_ASSIGN_OR_RETURN(bool less, value_less(a, b));
  return !less;
}

}  // namespace pagoda::jinja
