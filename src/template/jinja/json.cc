#include "template/jinja/json.h"

#include <algorithm>
#include <cstdio>

#include "template/jinja/unicode.h"

namespace pagoda::jinja {

Value value_from_json(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value(Value::None{});
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      auto u = json.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<std::int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      dict.entries.reserve(json.size());
      for (const auto& [key, item] : json.items())
        dict.entries.emplace_back(Value(key), value_from_json(item));
      return Value::dict(std::move(dict));
    }
    default: return Value(Value::None{});
  }
}

namespace {

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  std::size_t pos = 0;
  char buf[16];
  while (pos < s.size()) {
    std::size_t start = pos;
    char32_t cp = decode_utf8(s, pos);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7F)) {
          if (cp >= 0x10000) {
            char32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x",
                          static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
          }
          out += buf;
        } else {
          out.append(s.substr(start, pos - start));
        }
    }
  }
  out += '"';
}

StatusOr<std::string> key_text(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::kString: return key.as_string();
    case Value::Kind::kBool: return std::string(key.as_bool() ? "true" : "false");
    case Value::Kind::kNone: return std::string("null");
    case Value::Kind::kInt: return std::to_string(key.as_int());
    case Value::Kind::kFloat: return format_float(key.as_double());
    default:
      return invalid_argument("TypeError: keys must be str, int, float, bool or None, not " +
                              key.type_name());
  }
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : o_(options) {}

  Status dump(const Value& v, int level, std::string& out) {
    switch (v.kind()) {
      case Value::Kind::kNone: out += "null"; return Status::ok_status();
      case Value::Kind::kBool: out += v.as_bool() ? "true" : "false"; return Status::ok_status();
      case Value::Kind::kInt: out += std::to_string(v.as_int()); return Status::ok_status();
      case Value::Kind::kFloat: {
        double d = v.as_double();
        out += std::isnan(d)   ? "NaN"
               : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                               : format_float(d);
        return Status::ok_status();
      }
      case Value::Kind::kString:
        dump_string(out, v.as_string(), o_.ensure_ascii);
        return Status::ok_status();
      case Value::Kind::kList: {
        const auto& items = v.as_list().items;
        if (items.empty()) {
          out += "[]";
          return Status::ok_status();
        }
        out += '[';
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += o_.item_separator;
          newline(level + 1, out);
          PAGODA_RETURN_IF_ERROR(dump(items[i], level + 1, out));
        }
        newline(level, out);
        out += ']';
        return Status::ok_status();
      }
      case Value::Kind::kDict: {
        std::vector<std::pair<std::string, const Value*>> entries;
        for (const auto& [k, item] : v.as_dict().entries) {
          PAGODA_ASSIGN_OR_RETURN(std::string key, key_text(k));
          entries.emplace_back(std::move(key), &item);
        }
        if (entries.empty()) {
          out += "{}";
          return Status::ok_status();
        }
        if (o_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (std::size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) out += o_.item_separator;
          newline(level + 1, out);
          dump_string(out, entries[i].first, o_.ensure_ascii);
          out += o_.key_separator;
          PAGODA_RETURN_IF_ERROR(dump(*entries[i].second, level + 1, out));
        }
        newline(level, out);
        out += '}';
        return Status::ok_status();
      }
      default:
        return invalid_argument("TypeError: Object of type " + v.type_name() +
                                " is not JSON serializable");
    }
  }

 private:
  void newline(int level, std::string& out) const {
    if (!o_.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  const JsonDumpOptions& o_;
};

}  // namespace

StatusOr<std::string> dump_json(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  PAGODA_RETURN_IF_ERROR(Dumper(options).dump(value, 0, out));
  return out;
}

}  // namespace pagoda::jinja
