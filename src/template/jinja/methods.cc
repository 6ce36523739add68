#include "template/jinja/methods.h"

#include <string>

#include "template/jinja/arguments.h"
#include "template/jinja/unicode.h"

namespace pagoda::jinja {
namespace {

using Method = StatusOr<Value> (*)(const Value& self, const CallArgs& args);

Value bind_method(const Value& self, std::string_view name, Method method) {
  return Value::callable(std::string(name),
                         [self, method](Evaluator&, CallArgs args) { return method(self, args); });
}

Value unsafe(const Value& self, std::string_view name) {
  std::string message = "access to attribute '" + std::string(name) + "' of '" + self.type_name() +
                        "' object is unsafe.";
  return Value::callable(std::string(name), [message](Evaluator&, CallArgs) -> StatusOr<Value> {
    return invalid_argument(message);
  });
}

StatusOr<std::string> string_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) {
    return invalid_argument("TypeError: " + std::string(what) + " must be str, not " +
                            v.type_name());
  }
  return v.as_string();
}

StatusOr<Value> strip(const Value& self, const CallArgs& args, bool left, bool right) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"chars"}, "strip"));
  const std::string& s = self.as_string();
  if (a[0].is_undefined() || a[0].is_none())
    return Value(std::string(strip_python_space(s, left, right)));
  PAGODA_ASSIGN_OR_RETURN(std::string chars, string_arg(a[0], "strip arg"));
  return Value(std::string(strip_chars(s, chars, left, right)));
}

std::vector<Value> split_whitespace(std::string_view s, std::int64_t max_split) {
  std::vector<Value> parts;
  std::size_t pos = 0;
  while (true) {
    std::string_view rest = strip_python_space(s.substr(pos), true, false);
    if (rest.empty()) break;
    pos = s.size() - rest.size();
    if (max_split >= 0 && static_cast<std::int64_t>(parts.size()) == max_split) {
      parts.emplace_back(std::string(strip_python_space(rest, false, true)));
      break;
    }
    std::size_t end = pos;
    while (end < s.size()) {
      std::size_t next = end;
      if (is_python_space(decode_utf8(s, next))) break;
      end = next;
    }
    parts.emplace_back(std::string(s.substr(pos, end - pos)));
    pos = end;
  }
  return parts;
}

StatusOr<Value> split(const Value& self, const CallArgs& args, bool from_right) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"sep", "maxsplit"}, "split"));
  const std::string& s = self.as_string();
  std::int64_t max_split = a[1].is_integral() ? a[1].as_int() : -1;
  if (a[0].is_undefined() || a[0].is_none()) {
    if (from_right && max_split >= 0)
      return invalid_argument("rsplit() with maxsplit needs a separator");
    return Value::list(split_whitespace(s, max_split));
  }
  PAGODA_ASSIGN_OR_RETURN(std::string sep, string_arg(a[0], "separator"));
  if (sep.empty()) return invalid_argument("ValueError: empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    std::size_t pos = 0;
    while (max_split < 0 || static_cast<std::int64_t>(parts.size()) < max_split) {
      std::size_t hit = s.find(sep, pos);
      if (hit == std::string::npos) break;
      parts.push_back(s.substr(pos, hit - pos));
      pos = hit + sep.size();
    }
    parts.push_back(s.substr(pos));
  } else {
    std::size_t end = s.size();
    std::vector<std::string> reversed;
    while (max_split < 0 || static_cast<std::int64_t>(reversed.size()) < max_split) {
      if (end < sep.size()) break;
      std::size_t hit = s.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      reversed.push_back(s.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    parts.push_back(s.substr(0, end));
    parts.insert(parts.end(), reversed.rbegin(), reversed.rend());
  }
  std::vector<Value> out(parts.begin(), parts.end());
  return Value::list(std::move(out));
}

StatusOr<Value> splitlines(const Value& self, const CallArgs&) {
  const std::string& s = self.as_string();
  std::vector<Value> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.emplace_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return Value::list(std::move(lines));
}

StatusOr<Value> affix(const Value& self, const CallArgs& args, bool prefix) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          bind_arguments(args, {"affix"}, prefix ? "startswith" : "endswith"));
  std::vector<Value> candidates;
  if (a[0].is_list() && a[0].as_list().is_tuple) {
    candidates = a[0].as_list().items;
  } else {
    candidates.push_back(a[0]);
  }
  std::string_view s = self.as_string();
  for (const Value& c : candidates) {
    PAGODA_ASSIGN_OR_RETURN(std::string text,
                            string_arg(c, prefix ? "startswith arg" : "endswith arg"));
    if (prefix ? s.starts_with(text) : s.ends_with(text)) return Value(true);
  }
  return Value(false);
}

StatusOr<Value> find_or_count(const Value& self, const CallArgs& args, bool count) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"sub"}, count ? "count" : "find"));
  PAGODA_ASSIGN_OR_RETURN(std::string sub, string_arg(a[0], "substring"));
  const std::string& s = self.as_string();
  if (!count) {
    std::size_t hit = s.find(sub);
    if (hit == std::string::npos) return Value(-1);
    return Value(static_cast<std::int64_t>(code_point_count(std::string_view(s).substr(0, hit))));
  }
  if (sub.empty()) return Value(static_cast<std::int64_t>(code_point_count(s) + 1));
  std::int64_t n = 0;
  for (std::size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return Value(n);
}

StatusOr<Value> replace(const Value& self, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"old", "new", "count"}, "replace"));
  PAGODA_ASSIGN_OR_RETURN(std::string old_text, string_arg(a[0], "replace() argument 1"));
  PAGODA_ASSIGN_OR_RETURN(std::string new_text, string_arg(a[1], "replace() argument 2"));
  std::int64_t limit = a[2].is_integral() ? a[2].as_int() : -1;
  const std::string& s = self.as_string();
  std::string out;
  std::size_t pos = 0;
  std::int64_t done = 0;
  if (old_text.empty()) {
    auto offsets = code_point_offsets(s);
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
      if (limit < 0 || done++ < limit) out += new_text;
      out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
    }
    if (limit < 0 || done < limit) out += new_text;
    return Value(std::move(out));
  }
  while (limit < 0 || done < limit) {
    std::size_t hit = s.find(old_text, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += new_text;
    pos = hit + old_text.size();
    ++done;
  }
  out.append(s, pos);
  return Value(std::move(out));
}

StatusOr<Value> join(const Value& self, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"iterable"}, "join"));
  if (!a[0].is_list()) return invalid_argument("TypeError: can only join an iterable");
  std::string out;
  bool first = true;
  for (const Value& item : a[0].as_list().items) {
    if (!item.is_string())
      return invalid_argument("TypeError: sequence item: expected str instance, " +
                              item.type_name() + " found");
    if (!first) out += self.as_string();
    first = false;
    out += item.as_string();
  }
  return Value(std::move(out));
}

template <typename Pred>
Value all_chars(const std::string& s, Pred pred) {
  if (s.empty()) return Value(false);
  for (std::size_t pos = 0; pos < s.size();) {
    if (!pred(decode_utf8(s, pos))) return Value(false);
  }
  return Value(true);
}

StatusOr<Value> format(const Value& self, const CallArgs& args) {
  const std::string& s = self.as_string();
  std::string out;
  std::size_t next_arg = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (s[i] == '{') {
      std::size_t close = s.find('}', i);
      if (close == std::string::npos)
        return invalid_argument("ValueError: unmatched '{' in format string");
      std::string field = s.substr(i + 1, close - i - 1);
      const Value* v = nullptr;
      if (field.empty()) {
        if (next_arg < args.positional.size()) v = &args.positional[next_arg++];
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        std::size_t index = std::stoul(field);
        if (index < args.positional.size()) v = &args.positional[index];
      } else {
        for (const auto& [key, value] : args.keyword) {
          if (key == field) v = &value;
        }
      }
      if (v == nullptr)
        return invalid_argument("format(): no argument for field '{" + field + "}'");
      out += v->str();
      i = close;
    } else {
      out += s[i];
    }
  }
  return Value(std::move(out));
}

std::optional<Value> string_method(const Value& self, std::string_view name) {
  if (name == "strip")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return strip(v, a, true, true); });
  if (name == "lstrip")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return strip(v, a, true, false); });
  if (name == "rstrip")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return strip(v, a, false, true); });
  if (name == "split")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return split(v, a, false); });
  if (name == "rsplit")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return split(v, a, true); });
  if (name == "splitlines") return bind_method(self, name, splitlines);
  if (name == "startswith")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return affix(v, a, true); });
  if (name == "endswith")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return affix(v, a, false); });
  if (name == "find")
    return bind_method(
        self, name, [](const Value& v, const CallArgs& a) { return find_or_count(v, a, false); });
  if (name == "count")
    return bind_method(self, name,
                       [](const Value& v, const CallArgs& a) { return find_or_count(v, a, true); });
  if (name == "replace") return bind_method(self, name, replace);
  if (name == "join") return bind_method(self, name, join);
  if (name == "format") return bind_method(self, name, format);
  if (name == "upper")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_upper(v.as_string()));
    });
  if (name == "lower")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_lower(v.as_string()));
    });
  if (name == "title")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_title(v.as_string()));
    });
  if (name == "capitalize")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_capitalized(v.as_string()));
    });
  if (name == "isdigit")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return all_chars(v.as_string(), [](char32_t c) { return c >= '0' && c <= '9'; });
    });
  if (name == "isalpha")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return all_chars(v.as_string(),
                       [](char32_t c) { return c >= 0x80 || std::isalpha(static_cast<int>(c)); });
    });
  if (name == "isalnum")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return all_chars(v.as_string(),
                       [](char32_t c) { return c >= 0x80 || std::isalnum(static_cast<int>(c)); });
    });
  if (name == "isspace")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return all_chars(v.as_string(), is_python_space);
    });
  if (name == "isupper")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_upper(v.as_string()) == v.as_string() &&
                   to_lower(v.as_string()) != v.as_string());
    });
  if (name == "islower")
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      return Value(to_lower(v.as_string()) == v.as_string() &&
                   to_upper(v.as_string()) != v.as_string());
    });
  return std::nullopt;
}

StatusOr<Value> dict_get(const Value& self, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"key", "default"}, "get"));
  if (const Value* v = self.as_dict().find(a[0])) return *v;
  return a[1].is_undefined() ? Value(Value::None{}) : a[1];
}

std::optional<Value> dict_method(const Value& self, std::string_view name) {
  if (name == "get") return bind_method(self, name, dict_get);
  if (name == "items") {
    return bind_method(self, name, [](const Value& v, const CallArgs&) -> StatusOr<Value> {
      std::vector<Value> items;
      for (const auto& [k, x] : v.as_dict().entries) items.push_back(Value::list({k, x}, true));
      return Value::list(std::move(items));
    });
  }
  if (name == "keys" || name == "values") {
    bool keys = name == "keys";
    return Value::callable(std::string(name),
                           [self, keys](Evaluator&, CallArgs) -> StatusOr<Value> {
                             std::vector<Value> out;
                             for (const auto& [k, x] : self.as_dict().entries)
                               out.push_back(keys ? k : x);
                             return Value::list(std::move(out));
                           });
  }
  if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" ||
      name == "clear") {
    return unsafe(self, name);
  }
  return std::nullopt;
}

std::optional<Value> list_method(const Value& self, std::string_view name) {
  if (name == "count" || name == "index") {
    bool count = name == "count";
    return Value::callable(
        std::string(name), [self, count](Evaluator&, CallArgs args) -> StatusOr<Value> {
          PAGODA_ASSIGN_OR_RETURN(auto a,
                                  bind_arguments(args, {"value"}, count ? "count" : "index"));
          std::int64_t n = 0;
          const auto& items = self.as_list().items;
          for (std::size_t i = 0; i < items.size(); ++i) {
            if (!values_equal(items[i], a[0])) continue;
            if (!count) return Value(static_cast<std::int64_t>(i));
            ++n;
          }
          if (!count) return invalid_argument("ValueError: " + a[0].repr() + " is not in list");
          return Value(n);
        });
  }
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "clear" || name == "sort" || name == "reverse") {
    return unsafe(self, name);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kString: return string_method(obj, name);
    case Value::Kind::kDict: return dict_method(obj, name);
    case Value::Kind::kList: return list_method(obj, name);
    default: return std::nullopt;
  }
}

}  // namespace pagoda::jinja
