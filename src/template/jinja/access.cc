#include "template/jinja/access.h"

#include <algorithm>
#include <string>

#include "template/jinja/methods.h"
#include "template/jinja/unicode.h"

namespace pagoda::jinja {
namespace {

Value missing_attribute(const Value& obj, std::string_view name) {
  std::string type = obj.is_none() ? "None" : "'" + obj.type_name() + " object'";
  return Value::undefined(type + " has no attribute '" + std::string(name) + "'");
}

std::int64_t normalize_index(std::int64_t index, std::size_t size) {
  return index < 0 ? index + static_cast<std::int64_t>(size) : index;
}

}  // namespace

Status undefined_error(const Value& value) {
  const std::string& hint = value.undefined_hint();
  return invalid_argument(hint.empty() ? "value is undefined" : hint);
}

StatusOr<Value> get_attribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (auto method = bound_method(obj, name)) return *method;
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (const Value* v = obj.as_dict().find(name)) return *v;
      break;
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_namespace().attrs.find(name)) return *v;
      break;
    case Value::Kind::kCallable:
      if (obj.as_callable().attrs) {
        if (const Value* v = obj.as_callable().attrs->find(name)) return *v;
      }
      break;
    default: break;
  }
  return missing_attribute(obj, name);
}

StatusOr<Value> get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return undefined_error(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && key.is_integral()) {
    if (obj.is_list()) {
      const auto& items = obj.as_list().items;
      std::int64_t i = normalize_index(key.as_int(), items.size());
      if (i >= 0 && i < static_cast<std::int64_t>(items.size())) return items[i];
    } else {
      auto offsets = code_point_offsets(obj.as_string());
      std::int64_t i = normalize_index(key.as_int(), offsets.size() - 1);
      if (i >= 0 && i + 1 < static_cast<std::int64_t>(offsets.size())) {
        return Value(obj.as_string().substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
    }
  } else if (key.is_string()) {
    return get_attribute(obj, key.as_string());
  }
  if (key.is_string()) return missing_attribute(obj, key.as_string());
  return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

StatusOr<Value> get_slice(const Value& obj, const Value& start, const Value& stop,
                          const Value& step) {
  if (obj.is_undefined()) return undefined_error(obj);
  for (const Value* bound : {&start, &stop, &step}) {
    if (!bound->is_undefined() && !bound->is_none() && !bound->is_integral()) {
      return invalid_argument("TypeError: slice indices must be integers or None");
    }
  }
  std::int64_t st = step.is_integral() ? step.as_int() : 1;
  if (st == 0) return invalid_argument("ValueError: slice step cannot be zero");
  std::vector<std::size_t> offsets;
  std::size_t size = 0;
  if (obj.is_string()) {
    offsets = code_point_offsets(obj.as_string());
    size = offsets.size() - 1;
  } else if (obj.is_list()) {
    size = obj.as_list().items.size();
  } else {
    return invalid_argument("TypeError: '" + obj.type_name() + "' object is not subscriptable");
  }
  auto n = static_cast<std::int64_t>(size);
  auto clamp = [&](const Value& v, std::int64_t fallback) {
    if (!v.is_integral()) return fallback;
    std::int64_t i = v.as_int();
    if (i < 0) i += n;
    if (st > 0) return std::clamp<std::int64_t>(i, 0, n);
    return std::clamp<std::int64_t>(i, -1, n - 1);
  };
  std::int64_t lo = clamp(start, st > 0 ? 0 : n - 1);
  std::int64_t hi = clamp(stop, st > 0 ? n : -1);
  std::vector<std::int64_t> picked;
  for (std::int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) picked.push_back(i);
  if (obj.is_string()) {
    std::string out;
    for (std::int64_t i : picked) {
      out.append(obj.as_string(), offsets[i], offsets[i + 1] - offsets[i]);
    }
    return Value(std::move(out));
  }
  std::vector<Value> items;
  for (std::int64_t i : picked) items.push_back(obj.as_list().items[i]);
  return Value::list(std::move(items), obj.as_list().is_tuple);
}

StatusOr<std::vector<Value>> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return std::vector<Value>{};
    case Value::Kind::kList: return value.as_list().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& entry : value.as_dict().entries) keys.push_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      const std::string& s = value.as_string();
      auto offsets = code_point_offsets(s);
      for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
      return chars;
    }
    default:
      return invalid_argument("TypeError: '" + value.type_name() + "' object is not iterable");
  }
}

}  // namespace pagoda::jinja
