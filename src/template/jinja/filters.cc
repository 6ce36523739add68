// Filters over single values: strings, numbers, JSON. Sequence filters are in sequence_filters.cc.
#include "template/jinja/filters.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/jinja/access.h"
#include "template/jinja/arguments.h"
#include "template/jinja/json.h"
#include "template/jinja/unicode.h"

namespace pagoda::jinja {
namespace {

template <std::string (*Fn)(std::string_view)>
StatusOr<Value> string_filter(Evaluator&, const Value& v, const CallArgs&) {
  return Value(Fn(v.str()));
}

StatusOr<Value> trim(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"chars"}, "trim"));
  std::string s = v.str();
  if (a[0].is_string()) return Value(std::string(strip_chars(s, a[0].as_string(), true, true)));
  return Value(std::string(strip_python_space(s, true, true)));
}

StatusOr<Value> length(Evaluator&, const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return Value(0);
    case Value::Kind::kString:
      return Value(static_cast<std::int64_t>(code_point_count(v.as_string())));
    case Value::Kind::kList: return Value(static_cast<std::int64_t>(v.as_list().items.size()));
    case Value::Kind::kDict: return Value(static_cast<std::int64_t>(v.as_dict().entries.size()));
    default:
      return invalid_argument("TypeError: object of type '" + v.type_name() + "' has no len()");
  }
}

StatusOr<Value> default_filter(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"default_value", "boolean"}, "default"));
  bool use_default = v.is_undefined() || (a[1].truthy() && !v.truthy());
  if (!use_default) return v;
  return or_default(a[0], Value(""));
}

StatusOr<Value> replace(Evaluator& ev, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"old", "new", "count"}, "replace"));
  PAGODA_ASSIGN_OR_RETURN(Value method, get_attribute(Value(v.str()), "replace"));
  CallArgs call_args;
  call_args.positional = {Value(a[0].str()), Value(a[1].str())};
  if (a[2].is_integral()) call_args.positional.push_back(a[2]);
  return method.as_callable().fn(ev, std::move(call_args));
}

StatusOr<Value> tojson(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(
      auto a,
      bind_arguments(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson"));
  JsonDumpOptions options;
  options.ensure_ascii = a[0].truthy();
  if (a[1].is_integral()) {
    options.indent =
        std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, a[1].as_int())), ' ');
  } else if (a[1].is_string()) {
    options.indent = a[1].as_string();
  }
  if (options.indent) options.item_separator = ",";
  if (a[2].is_list() && a[2].as_list().items.size() == 2) {
    options.item_separator = a[2].as_list().items[0].str();
    options.key_separator = a[2].as_list().items[1].str();
  }
  options.sort_keys = a[3].truthy();
  PAGODA_ASSIGN_OR_RETURN(std::string text, dump_json(v, options));
  return Value(std::move(text));
}

std::optional<std::int64_t> parse_int(std::string_view text, int base) {
  std::string s(strip_python_space(text, true, true));
  std::erase(s, '_');
  if (base == 16 && (s.starts_with("0x") || s.starts_with("0X"))) s = s.substr(2);
  if (s.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, base);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

std::optional<double> parse_float(std::string_view text) {
  std::string s(strip_python_space(text, true, true));
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return v;
}

StatusOr<Value> int_filter(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"default", "base"}, "int"));
  Value fallback = or_default(a[0], Value(0));
  if (v.is_integral()) return Value(v.as_int());
  if (v.kind() == Value::Kind::kFloat) {
    double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return fallback;
    return Value(static_cast<std::int64_t>(d));
  }
  if (!v.is_string()) return fallback;
  int base = a[1].is_integral() ? static_cast<int>(a[1].as_int()) : 10;
  if (base < 2 || base > 36) return fallback;
  if (auto i = parse_int(v.as_string(), base)) return Value(*i);
  if (base == 10) {
    if (auto d = parse_float(v.as_string()); d && std::isfinite(*d) && std::fabs(*d) < 9.2e18) {
      return Value(static_cast<std::int64_t>(*d));
    }
  }
  return fallback;
}

StatusOr<Value> float_filter(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"default"}, "float"));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.as_string())) return Value(*d);
  }
  return or_default(a[0], Value(0.0));
}

StatusOr<Value> abs_filter(Evaluator&, const Value& v, const CallArgs&) {
  if (v.kind() == Value::Kind::kFloat) return Value(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) return out_of_range("integer overflow in abs");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  return invalid_argument("TypeError: bad operand type for abs(): '" + v.type_name() + "'");
}

StatusOr<Value> round_filter(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"precision", "method"}, "round"));
  if (!v.is_number())
    return invalid_argument("TypeError: round() needs a number, got " + v.type_name());
  int precision =
      a[0].is_integral() ? static_cast<int>(std::clamp<std::int64_t>(a[0].as_int(), -20, 20)) : 0;
  std::string method = a[1].is_string() ? a[1].as_string() : "common";
  if (method == "common") {
    if (v.is_integral()) return Value(v.as_int());
    if (precision < 0)
      return Value(std::nearbyint(v.as_double() / std::pow(10.0, -precision)) *
                   std::pow(10.0, -precision));
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", precision, v.as_double());
    return Value(std::strtod(buf, nullptr));
  }
  if (method != "ceil" && method != "floor") {
    return invalid_argument("method must be 'common', 'ceil' or 'floor'");
  }
  double scale = std::pow(10.0, precision);
  double scaled = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(scaled) : std::floor(scaled)) / scale);
}

StatusOr<Value> escape(Evaluator&, const Value& v, const CallArgs&) {
  std::string out;
  for (char c : v.str()) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

StatusOr<Value> indent(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"width", "first", "blank"}, "indent"));
  std::string pad =
      a[0].is_string()
          ? a[0].as_string()
          : std::string(a[0].is_integral()
                            ? static_cast<std::size_t>(std::max<std::int64_t>(0, a[0].as_int()))
                            : 4,
                        ' ');
  std::vector<std::string> lines;
  std::string s = v.str() + "\n";
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += "\n";
      if (a[2].truthy() || !lines[i].empty()) out += pad;
    }
    out += lines[i];
  }
  if (a[1].truthy()) out = pad + out;
  return Value(std::move(out));
}

StatusOr<Value> wordcount(Evaluator&, const Value& v, const CallArgs&) {
  std::string s = v.str();
  std::int64_t words = 0;
  bool in_word = false;
  for (unsigned char c : s) {
    bool word_char = std::isalnum(c) || c == '_' || c >= 0x80;
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value(words);
}

StatusOr<Value> center(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"width"}, "center"));
  std::string s = v.str();
  std::int64_t width = a[0].is_integral() ? a[0].as_int() : 80;
  auto len = static_cast<std::int64_t>(code_point_count(s));
  if (width <= len) return Value(std::move(s));
  std::int64_t pad = std::min<std::int64_t>(width - len, 1 << 20);
  std::int64_t left = pad / 2 + (pad & width & 1);
  return Value(std::string(static_cast<std::size_t>(left), ' ') + s +
               std::string(static_cast<std::size_t>(pad - left), ' '));
}

StatusOr<Value> attr(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"name"}, "attr"));
  return get_attribute(v, a[0].str());
}

const FilterMap& registry() {
  static const FilterMap filters = [] {
    FilterMap f = {
        {"trim", trim},
        {"upper", string_filter<to_upper>},
        {"lower", string_filter<to_lower>},
        {"title", string_filter<to_title>},
        {"capitalize", string_filter<to_capitalized>},
        {"length", length},
        {"count", length},
        {"default", default_filter},
        {"d", default_filter},
        {"replace", replace},
        {"tojson", tojson},
        {"string",
         [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<Value> {
           return Value(v.str());
         }},
        {"safe", [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<Value> { return v; }},
        {"int", int_filter},
        {"float", float_filter},
        {"abs", abs_filter},
        {"round", round_filter},
        {"escape", escape},
        {"e", escape},
        {"indent", indent},
        {"wordcount", wordcount},
        {"center", center},
        {"attr", attr},
    };
    add_sequence_filters(f);
    return f;
  }();
  return filters;
}

}  // namespace

const FilterFn* find_filter(std::string_view name) {
  const auto& filters = registry();
  auto it = filters.find(name);
  return it == filters.end() ? nullptr : &it->second;
}

}  // namespace pagoda::jinja
