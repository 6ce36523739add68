#include "template/jinja/tests.h"

#include <map>
#include <string>

#include "template/jinja/arguments.h"
#include "template/jinja/operators.h"
#include "template/jinja/unicode.h"

namespace pagoda::jinja {
namespace {

StatusOr<Value> only_arg(const CallArgs& args, std::string_view test) {
  PAGODA_ASSIGN_OR_RETURN(auto a, bind_arguments(args, {"other"}, test));
  return a[0];
}

StatusOr<bool> compare_with(const Value& input, const CallArgs& args, std::string_view op) {
  PAGODA_ASSIGN_OR_RETURN(Value other, only_arg(args, op));
  return compare_op(op, input, other);
}

StatusOr<bool> parity(const Value& input, bool even) {
  if (!input.is_integral()) {
    return invalid_argument("TypeError: unsupported operand type(s) for %: '" + input.type_name() +
                            "' and 'int'");
  }
  return (input.as_int() % 2 == 0) == even;
}

const std::map<std::string, TestFn, std::less<>>& registry() {
  static const std::map<std::string, TestFn, std::less<>> tests = {
      {"defined",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return !v.is_undefined();
       }},
      {"undefined",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_undefined();
       }},
      {"none",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_none(); }},
      {"string",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_string(); }},
      {"number",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_number(); }},
      {"integer",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.kind() == Value::Kind::kInt;
       }},
      {"float",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.kind() == Value::Kind::kFloat;
       }},
      {"boolean",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_bool(); }},
      {"true",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_bool() && v.as_bool();
       }},
      {"false",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_bool() && !v.as_bool();
       }},
      {"mapping",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> { return v.is_dict(); }},
      {"iterable",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"sequence",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
       }},
      {"callable",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         return v.kind() == Value::Kind::kCallable;
       }},
      {"lower",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         std::string s = v.str();
         return to_lower(s) == s;
       }},
      {"upper",
       [](Evaluator&, const Value& v, const CallArgs&) -> StatusOr<bool> {
         std::string s = v.str();
         return to_upper(s) == s;
       }},
      {"even", [](Evaluator&, const Value& v, const CallArgs&) { return parity(v, true); }},
      {"odd", [](Evaluator&, const Value& v, const CallArgs&) { return parity(v, false); }},
      {"divisibleby",
       [](Evaluator&, const Value& v, const CallArgs& a) -> StatusOr<bool> {
         PAGODA_ASSIGN_OR_RETURN(Value d, only_arg(a, "divisibleby"));
         if (!v.is_integral() || !d.is_integral())
           return invalid_argument("divisibleby needs integers");
         if (d.as_int() == 0)
           return invalid_argument("ZeroDivisionError: integer division or modulo by zero");
         return v.as_int() % d.as_int() == 0;
       }},
      {"sameas",
       [](Evaluator&, const Value& v, const CallArgs& a) -> StatusOr<bool> {
         PAGODA_ASSIGN_OR_RETURN(Value o, only_arg(a, "sameas"));
         if (v.kind() != o.kind()) return false;
         return (v.is_none() || v.is_bool()) ? values_equal(v, o) : false;
       }},
      {"in",
       [](Evaluator&, const Value& v, const CallArgs& a) -> StatusOr<bool> {
         PAGODA_ASSIGN_OR_RETURN(Value seq, only_arg(a, "in"));
         return contains(seq, v);
       }},
      {"eq",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "=="); }},
      {"equalto",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "=="); }},
      {"==",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "=="); }},
      {"ne",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "!="); }},
      {"!=",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "!="); }},
      {"lt", [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "<"); }},
      {"lessthan",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "<"); }},
      {"<", [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "<"); }},
      {"le",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "<="); }},
      {"<=",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, "<="); }},
      {"gt", [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, ">"); }},
      {"greaterthan",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, ">"); }},
      {">", [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, ">"); }},
      {"ge",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, ">="); }},
      {">=",
       [](Evaluator&, const Value& v, const CallArgs& a) { return compare_with(v, a, ">="); }},
  };
  return tests;
}

}  // namespace

const TestFn* find_test(std::string_view name) {
  const auto& tests = registry();
  auto it = tests.find(name);
  return it == tests.end() ? nullptr : &it->second;
}

}  // namespace pagoda::jinja
