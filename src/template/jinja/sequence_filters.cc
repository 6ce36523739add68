// Filters over sequences and mappings: join, map, select, sort, unique, dictsort, batch...
#include <algorithm>

#include "template/jinja/access.h"
#include "template/jinja/arguments.h"
#include "template/jinja/evaluator.h"
#include "template/jinja/filters.h"
#include "template/jinja/unicode.h"

namespace pagoda::jinja {
namespace {

// jinja2's attribute getter: "a.b.0" walks items and attributes one part at a time.
StatusOr<Value> attribute_path(const Value& item, const Value& path) {
  if (path.is_integral()) return get_item(item, path);
  Value current = item;
  std::string p = path.str();
  std::size_t start = 0;
  while (true) {
    std::size_t dot = p.find('.', start);
    std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    PAGODA_ASSIGN_OR_RETURN(
        current, numeric ? get_item(current, Value(static_cast<std::int64_t>(std::stoll(part))))
                         : get_item(current, Value(part)));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

Value sort_key(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(to_lower(v.as_string())) : v;
}

StatusOr<std::vector<Value>> items_of(const Value& v) {
  return iterate(v);
}

StatusOr<Value> list_filter(Evaluator&, const Value& v, const CallArgs&) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  return Value::list(std::move(items));
}

StatusOr<Value> first(Evaluator&, const Value& v, const CallArgs&) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

StatusOr<Value> last(Evaluator&, const Value& v, const CallArgs&) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

StatusOr<Value> join(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"d", "attribute"}, "join"));
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::string sep = a[0].str();
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    if (a[1].is_undefined()) {
      out += items[i].str();
    } else {
      PAGODA_ASSIGN_OR_RETURN(Value field, attribute_path(items[i], a[1]));
      out += field.str();
    }
  }
  return Value(std::move(out));
}

StatusOr<Value> map_filter(Evaluator& ev, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> out;
  const Value* attribute = nullptr;
  const Value* fallback = nullptr;
  for (const auto& [key, value] : args.keyword) {
    if (key == "attribute") attribute = &value;
    if (key == "default") fallback = &value;
  }
  if (attribute != nullptr) {
    for (const Value& item : items) {
      PAGODA_ASSIGN_OR_RETURN(Value field, attribute_path(item, *attribute));
      out.push_back(field.is_undefined() && fallback != nullptr ? *fallback : field);
    }
    return Value::list(std::move(out));
  }
  if (args.positional.empty()) return invalid_argument("map() needs a filter name or attribute=");
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    PAGODA_ASSIGN_OR_RETURN(Value mapped, ev.apply_filter(args.positional[0].str(), item, rest));
    out.push_back(std::move(mapped));
  }
  return Value::list(std::move(out));
}

// select/reject (by_attribute=false) and selectattr/rejectattr (true).
StatusOr<Value> select(Evaluator& ev, const Value& v, const CallArgs& args, bool by_attribute,
                       bool keep) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::size_t next = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) return invalid_argument("selectattr() needs an attribute name");
    attribute = args.positional[next++];
  }
  std::string test;
  if (next < args.positional.size()) test = args.positional[next++].str();
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next),
                              args.positional.end());
  test_args.keyword = args.keyword;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value subject = item;
    if (by_attribute) {
      PAGODA_ASSIGN_OR_RETURN(subject, attribute_path(item, attribute));
    }
    bool passed = subject.truthy();
    if (!test.empty()) {
      PAGODA_ASSIGN_OR_RETURN(passed, ev.apply_test(test, subject, test_args));
    }
    if (passed == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

StatusOr<Value> dict_items(Evaluator&, const Value& v, const CallArgs&) {
  std::vector<Value> out;
  if (v.is_undefined()) return Value::list(std::move(out));
  if (!v.is_dict()) return invalid_argument("items() needs a mapping, got " + v.type_name());
  for (const auto& [k, x] : v.as_dict().entries) out.push_back(Value::list({k, x}, true));
  return Value::list(std::move(out));
}

// Stable sort by key; `key_of` maps each item to what is compared.
template <typename KeyOf>
Status sort_values(std::vector<Value>& items, bool reverse, KeyOf key_of) {
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    PAGODA_ASSIGN_OR_RETURN(Value key, key_of(item));
    keyed.emplace_back(std::move(key), std::move(item));
  }
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto less = reverse ? value_less(b.first, a.first) : value_less(a.first, b.first);
    if (!less.ok()) {
      if (error.ok()) error = less.status();
      return false;
    }
    return *less;
  });
  PAGODA_RETURN_IF_ERROR(error);
  items.clear();
  for (auto& [key, item] : keyed) items.push_back(std::move(item));
  return Status::ok_status();
}

StatusOr<Value> dictsort(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          bind_arguments(args, {"case_sensitive", "by", "reverse"}, "dictsort"));
  if (!v.is_dict()) return invalid_argument("dictsort() needs a mapping, got " + v.type_name());
  std::vector<Value> pairs;
  for (const auto& [k, x] : v.as_dict().entries) pairs.push_back(Value::list({k, x}, true));
  std::size_t index = a[1].is_string() && a[1].as_string() == "value" ? 1 : 0;
  bool case_sensitive = a[0].truthy();
  PAGODA_RETURN_IF_ERROR(sort_values(pairs, a[2].truthy(), [&](const Value& p) -> StatusOr<Value> {
    return sort_key(p.as_list().items[index], case_sensitive);
  }));
  return Value::list(std::move(pairs));
}

StatusOr<Value> sort(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a,
                          bind_arguments(args, {"reverse", "case_sensitive", "attribute"}, "sort"));
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  bool case_sensitive = a[1].truthy();
  PAGODA_RETURN_IF_ERROR(
      sort_values(items, a[0].truthy(), [&](const Value& item) -> StatusOr<Value> {
        if (a[2].is_undefined()) return sort_key(item, case_sensitive);
        PAGODA_ASSIGN_OR_RETURN(Value field, attribute_path(item, a[2]));
        return sort_key(field, case_sensitive);
      }));
  return Value::list(std::move(items));
}

StatusOr<Value> unique(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"case_sensitive", "attribute"}, "unique"));
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : items) {
    Value key = item;
    if (!a[1].is_undefined()) {
      PAGODA_ASSIGN_OR_RETURN(key, attribute_path(item, a[1]));
    }
    key = sort_key(key, a[0].truthy());
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); }))
      continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

StatusOr<Value> extreme(const Value& v, const CallArgs& args, bool want_max) {
  PAGODA_ASSIGN_OR_RETURN(
      auto a, bind_arguments(args, {"case_sensitive", "attribute"}, want_max ? "max" : "min"));
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  if (items.empty())
    return Value::undefined(want_max ? "No largest item, sequence was empty."
                                     : "No smallest item, sequence was empty.");
  const Value* best = nullptr;
  Value best_key;
  for (const Value& item : items) {
    Value key = item;
    if (!a[1].is_undefined()) {
      PAGODA_ASSIGN_OR_RETURN(key, attribute_path(item, a[1]));
    }
    key = sort_key(key, a[0].truthy());
    if (best != nullptr) {
      PAGODA_ASSIGN_OR_RETURN(bool better,
                              want_max ? value_less(best_key, key) : value_less(key, best_key));
      if (!better) continue;
    }
    best = &item;
    best_key = key;
  }
  return *best;
}

StatusOr<Value> sum(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"attribute", "start"}, "sum"));
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  Value total = or_default(a[1], Value(0));
  for (const Value& item : items) {
    Value term = item;
    if (!a[0].is_undefined()) {
      PAGODA_ASSIGN_OR_RETURN(term, attribute_path(item, a[0]));
    }
    if (!term.is_number() || !total.is_number()) {
      return invalid_argument("TypeError: unsupported operand type(s) for +: '" +
                              total.type_name() + "' and '" + term.type_name() + "'");
    }
    if (term.kind() == Value::Kind::kFloat || total.kind() == Value::Kind::kFloat) {
      total = Value(total.as_double() + term.as_double());
    } else {
      total = Value(total.as_int() + term.as_int());
    }
  }
  return total;
}

StatusOr<Value> reverse(Evaluator&, const Value& v, const CallArgs&) {
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::reverse(items.begin(), items.end());
  if (!v.is_string()) return Value::list(std::move(items));
  std::string out;
  for (const Value& c : items) out += c.as_string();
  return Value(std::move(out));
}

StatusOr<Value> batch(Evaluator&, const Value& v, const CallArgs& args) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"linecount", "fill_with"}, "batch"));
  if (!a[0].is_integral() || a[0].as_int() <= 0)
    return invalid_argument("batch() needs a positive line count");
  auto size = static_cast<std::size_t>(a[0].as_int());
  PAGODA_ASSIGN_OR_RETURN(auto items, items_of(v));
  std::vector<Value> out;
  for (std::size_t i = 0; i < items.size(); i += size) {
    std::vector<Value> row(
        items.begin() + static_cast<std::ptrdiff_t>(i),
        items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), i + size)));
    while (!a[1].is_undefined() && row.size() < size) row.push_back(a[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return Value::list(std::move(out));
}

}  // namespace

void add_sequence_filters(FilterMap& f) {
  f.emplace("list", list_filter);
  f.emplace("first", first);
  f.emplace("last", last);
  f.emplace("join", join);
  f.emplace("map", map_filter);
  f.emplace("select", [](Evaluator& ev, const Value& v, const CallArgs& a) {
    return select(ev, v, a, false, true);
  });
  f.emplace("reject", [](Evaluator& ev, const Value& v, const CallArgs& a) {
    return select(ev, v, a, false, false);
  });
  f.emplace("selectattr", [](Evaluator& ev, const Value& v, const CallArgs& a) {
    return select(ev, v, a, true, true);
  });
  f.emplace("rejectattr", [](Evaluator& ev, const Value& v, const CallArgs& a) {
    return select(ev, v, a, true, false);
  });
  f.emplace("items", dict_items);
  f.emplace("dictsort", dictsort);
  f.emplace("sort", sort);
  f.emplace("unique", unique);
  f.emplace("min",
            [](Evaluator&, const Value& v, const CallArgs& a) { return extreme(v, a, false); });
  f.emplace("max",
            [](Evaluator&, const Value& v, const CallArgs& a) { return extreme(v, a, true); });
  f.emplace("sum", sum);
  f.emplace("reverse", reverse);
  f.emplace("batch", batch);
}

}  // namespace pagoda::jinja
