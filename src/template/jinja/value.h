// The dynamic value every Jinja expression evaluates to, with Python's semantics: ints apart from
// floats, bools that are ints, insertion-ordered dicts, and Python's str()/repr() when printed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::jinja {

class Evaluator;
class Value;

/// Positional and keyword arguments of one call.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

/// Lists and tuples share one representation; only printing tells them apart.
struct List {
  std::vector<Value> items;
  bool is_tuple = false;
};

/// A Python dict: keys keep insertion order; lookups are linear (chat dicts are small).
struct Dict {
  std::vector<std::pair<Value, Value>> entries;
  /// The value stored under `key`, or nullptr.
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  /// Replaces the value under `key` or appends a new entry.
  void set(Value key, Value value);
};

/// jinja2's namespace(): the one mutable object a template can write to.
struct Namespace {
  Dict attrs;
};

/// Builtins, macros, bound methods and the loop object (which is callable for recursive loops).
struct Callable {
  using Fn = std::function<StatusOr<Value>(Evaluator&, CallArgs)>;
  std::string name;
  Fn fn;
  std::shared_ptr<const Dict> attrs;
};

/// One Jinja value. Copies are cheap for containers (shared, immutable) and namespaces (shared).
class Value {
 public:
  enum class Kind : std::uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable,
  };
  /// Undefined carries the text that jinja2 reports when it is used: "'x' is undefined".
  struct Undefined {
    std::string hint;
  };
  struct None {};

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}                                 // NOLINT(google-explicit-constructor)
  Value(bool b) : v_(b) {}                                    // NOLINT(google-explicit-constructor)
  Value(std::int64_t i) : v_(i) {}                            // NOLINT(google-explicit-constructor)
  Value(int i) : v_(static_cast<std::int64_t>(i)) {}          // NOLINT(google-explicit-constructor)
  Value(double d) : v_(d) {}                                  // NOLINT(google-explicit-constructor)
  Value(std::string s) : v_(std::move(s)) {}                  // NOLINT(google-explicit-constructor)
  Value(const char* s) : v_(std::string(s)) {}                // NOLINT(google-explicit-constructor)
  Value(std::shared_ptr<const List> l) : v_(std::move(l)) {}  // NOLINT
  Value(std::shared_ptr<const Dict> d) : v_(std::move(d)) {}  // NOLINT
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}   // NOLINT
  Value(std::shared_ptr<const Callable> c) : v_(std::move(c)) {}  // NOLINT

  /// An undefined value whose use reports `hint`.
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(Dict dict);
  static Value callable(std::string name, Callable::Fn fn,
                        std::shared_ptr<const Dict> attrs = nullptr);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  /// True for ints and bools, as Python's isinstance(x, int).
  bool is_integral() const { return kind() == Kind::kInt || kind() == Kind::kBool; }
  bool is_number() const { return is_integral() || kind() == Kind::kFloat; }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }

  bool as_bool() const { return std::get<bool>(v_); }
  /// The integer value of an int or bool.
  std::int64_t as_int() const;
  /// The numeric value of an int, bool or float.
  double as_double() const;
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<const Callable>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  /// Python truthiness; undefined is false.
  bool truthy() const;
  /// Python's str(): what `{{ value }}` prints.
  std::string str() const;
  /// Python's repr(): how values print inside containers.
  std::string repr() const;
  /// jinja2's name for the type in error messages ("dict object", "str").
  std::string type_name() const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}

  std::variant<Undefined, None, bool, std::int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>, std::shared_ptr<Namespace>,
               std::shared_ptr<const Callable>>
      v_;
};

/// Python ==; undefined equals only undefined.
bool values_equal(const Value& a, const Value& b);
/// Python's <, for numbers, strings and sequences of those; an error for other pairs.
StatusOr<bool> value_less(const Value& a, const Value& b);
/// Python's repr() of a float: shortest round trip, "1.0", "1e-05", "inf".
std::string format_float(double d);
/// Python's repr() of a string, with its choice of quotes.
std::string repr_string(std::string_view s);

}  // namespace pagoda::jinja
