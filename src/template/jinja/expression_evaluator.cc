// Expression half of the evaluator.
#include "template/jinja/access.h"
#include "template/jinja/evaluator.h"
#include "template/jinja/filters.h"
#include "template/jinja/operators.h"
#include "template/jinja/tests.h"

namespace pagoda::jinja {

StatusOr<Value> Evaluator::eval(const Expr& expr, const ScopePtr& scope) {
  line_ = expr.line;
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.literal;
    case ExprKind::kName: return eval_name(expr, scope);
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict: return eval_container(expr, scope);
    case ExprKind::kGetattr: {
      PAGODA_ASSIGN_OR_RETURN(Value obj, eval(*expr.children[0], scope));
      return get_attribute(obj, expr.name);
    }
    case ExprKind::kGetitem: {
      PAGODA_ASSIGN_OR_RETURN(Value obj, eval(*expr.children[0], scope));
      PAGODA_ASSIGN_OR_RETURN(Value key, eval(*expr.children[1], scope));
      return get_item(obj, key);
    }
    case ExprKind::kSlice: {
      PAGODA_ASSIGN_OR_RETURN(Value obj, eval(*expr.children[0], scope));
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        if (expr.children[i + 1]) {
          PAGODA_ASSIGN_OR_RETURN(bounds[i], eval(*expr.children[i + 1], scope));
        }
      }
      return get_slice(obj, bounds[0], bounds[1], bounds[2]);
    }
    case ExprKind::kCall: return eval_call(expr, scope, nullptr);
    case ExprKind::kFilter: return eval_filter(expr, scope, nullptr);
    case ExprKind::kTest: {
      PAGODA_ASSIGN_OR_RETURN(Value input, eval(*expr.children[0], scope));
      PAGODA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1, scope));
      line_ = expr.line;
      PAGODA_ASSIGN_OR_RETURN(bool result, apply_test(expr.name, input, args));
      return Value(result != expr.negated);
    }
    case ExprKind::kNot: {
      PAGODA_ASSIGN_OR_RETURN(Value v, eval(*expr.children[0], scope));
      return Value(!v.truthy());
    }
    case ExprKind::kNegate:
    case ExprKind::kPlus: {
      PAGODA_ASSIGN_OR_RETURN(Value v, eval(*expr.children[0], scope));
      if (v.is_undefined()) return undefined_error(v);
      if (!v.is_number()) {
        return invalid_argument(std::string("TypeError: bad operand type for unary ") +
                                (expr.kind == ExprKind::kNegate ? "-" : "+") + ": '" +
                                v.type_name() + "'");
      }
      if (expr.kind == ExprKind::kPlus) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.kind() == Value::Kind::kFloat) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) return out_of_range("integer overflow in template arithmetic");
      return Value(-v.as_int());
    }
    case ExprKind::kBinary: {
      PAGODA_ASSIGN_OR_RETURN(Value a, eval(*expr.children[0], scope));
      PAGODA_ASSIGN_OR_RETURN(Value b, eval(*expr.children[1], scope));
      line_ = expr.line;
      return binary_op(expr.name, a, b, options_.limits.max_output_bytes);
    }
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      PAGODA_ASSIGN_OR_RETURN(Value a, eval(*expr.children[0], scope));
      if (a.truthy() == (expr.kind == ExprKind::kOr)) return a;
      return eval(*expr.children[1], scope);
    }
    case ExprKind::kCompare: return eval_compare(expr, scope);
    case ExprKind::kCondition: {
      PAGODA_ASSIGN_OR_RETURN(Value cond, eval(*expr.children[1], scope));
      if (cond.truthy()) return eval(*expr.children[0], scope);
      if (expr.children[2]) return eval(*expr.children[2], scope);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return internal_error("unknown expression kind");
}

StatusOr<Value> Evaluator::eval_name(const Expr& expr, const ScopePtr& scope) {
  if (const Value* v = scope->find(expr.name)) return *v;
  return Value::undefined("'" + expr.name + "' is undefined");
}

StatusOr<Value> Evaluator::eval_container(const Expr& expr, const ScopePtr& scope) {
  std::vector<Value> items;
  items.reserve(expr.children.size());
  for (const ExprPtr& child : expr.children) {
    PAGODA_ASSIGN_OR_RETURN(Value v, eval(*child, scope));
    items.push_back(std::move(v));
  }
  if (expr.kind != ExprKind::kDict)
    return Value::list(std::move(items), expr.kind == ExprKind::kTuple);
  Dict dict;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].is_list() || items[i].is_dict()) {
      return invalid_argument("TypeError: unhashable type: '" + items[i].type_name() + "'");
    }
    dict.set(std::move(items[i]), std::move(items[i + 1]));
  }
  return Value::dict(std::move(dict));
}

StatusOr<Value> Evaluator::eval_compare(const Expr& expr, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value left, eval(*expr.children[0], scope));
  for (std::size_t i = 0; i < expr.ops.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value right, eval(*expr.children[i + 1], scope));
    line_ = expr.line;
    PAGODA_ASSIGN_OR_RETURN(bool ok, compare_op(expr.ops[i], left, right));
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

StatusOr<CallArgs> Evaluator::eval_args(const Expr& expr, std::size_t first,
                                        const ScopePtr& scope) {
  CallArgs args;
  for (std::size_t i = first; i < expr.children.size(); ++i) {
    PAGODA_ASSIGN_OR_RETURN(Value v, eval(*expr.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [key, value_expr] : expr.kwargs) {
    PAGODA_ASSIGN_OR_RETURN(Value v, eval(*value_expr, scope));
    args.keyword.emplace_back(key, std::move(v));
  }
  return args;
}

StatusOr<Value> Evaluator::eval_call(const Expr& expr, const ScopePtr& scope, const Value* caller) {
  PAGODA_ASSIGN_OR_RETURN(Value callee, eval(*expr.children[0], scope));
  PAGODA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1, scope));
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  line_ = expr.line;
  return call(callee, std::move(args));
}

StatusOr<Value> Evaluator::call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) return undefined_error(callee);
  if (callee.kind() != Value::Kind::kCallable) {
    return invalid_argument("TypeError: '" + callee.type_name() + "' object is not callable");
  }
  PAGODA_RETURN_IF_ERROR(check_call_depth());
  CallGuard guard(*this);
  return callee.as_callable().fn(*this, std::move(args));
}

StatusOr<Value> Evaluator::eval_filter(const Expr& expr, const ScopePtr& scope,
                                       const Value* input) {
  Value in;
  const Expr* inner = expr.children[0].get();
  if (inner == nullptr) {
    in = *input;
  } else if (input != nullptr) {
    PAGODA_ASSIGN_OR_RETURN(in, eval_filter(*inner, scope, input));
  } else {
    PAGODA_ASSIGN_OR_RETURN(in, eval(*inner, scope));
  }
  PAGODA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1, scope));
  line_ = expr.line;
  return apply_filter(expr.name, in, args);
}

StatusOr<Value> Evaluator::apply_filter(std::string_view name, const Value& input,
                                        const CallArgs& args) {
  const FilterFn* filter = find_filter(name);
  if (filter == nullptr) return invalid_argument("No filter named '" + std::string(name) + "'.");
  return (*filter)(*this, input, args);
}

StatusOr<bool> Evaluator::apply_test(std::string_view name, const Value& input,
                                     const CallArgs& args) {
  const TestFn* test = find_test(name);
  if (test == nullptr) return invalid_argument("No test named '" + std::string(name) + "'.");
  return (*test)(*this, input, args);
}

}  // namespace pagoda::jinja
