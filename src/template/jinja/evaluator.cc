#include "template/jinja/evaluator.h"

#include "template/jinja/access.h"
#include "template/jinja/globals.h"

namespace pagoda::jinja {

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent.get()) {
    for (auto it = s->vars.rbegin(); it != s->vars.rend(); ++it) {
      if (it->first == name) return &it->second;
    }
  }
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [k, v] : vars) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

StatusOr<std::string> Evaluator::render(const StmtList& body,
                                        std::vector<std::pair<std::string, Value>> globals) {
  auto builtins = std::make_shared<Scope>();
  builtins->vars = builtin_globals();
  auto root = std::make_shared<Scope>();
  root->parent = builtins;
  root->vars = std::move(globals);
  std::string out;
  auto flow = exec_body(body, root, out);
  if (!flow.ok()) {
    return Status(flow.status().code(),
                  flow.status().message() + " (template line " + std::to_string(line_) + ")");
  }
  return out;
}

Status Evaluator::append(std::string& out, std::string_view text) {
  if (out.size() + text.size() > options_.limits.max_output_bytes) {
    return out_of_range("template output exceeds the limit of " +
                        std::to_string(options_.limits.max_output_bytes) + " bytes");
  }
  out.append(text);
  return Status::ok_status();
}

Status Evaluator::check_call_depth() const {
  if (call_depth_ >= options_.limits.max_call_depth) {
    return out_of_range("template calls nest deeper than the limit of " +
                        std::to_string(options_.limits.max_call_depth));
  }
  return Status::ok_status();
}

StatusOr<Evaluator::Flow> Evaluator::exec_body(const StmtList& body, const ScopePtr& scope,
                                               std::string& out) {
  for (const StmtPtr& stmt : body) {
    PAGODA_ASSIGN_OR_RETURN(Flow flow, exec(*stmt, scope, out));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

StatusOr<std::string> Evaluator::capture(const StmtList& body, const ScopePtr& scope) {
  std::string out;
  auto child = std::make_shared<Scope>();
  child->parent = scope;
  PAGODA_ASSIGN_OR_RETURN(Flow flow, exec_body(body, child, out));
  (void)flow;  // break/continue cannot leave a captured block.
  return out;
}

StatusOr<Evaluator::Flow> Evaluator::exec(const Stmt& stmt, const ScopePtr& scope,
                                          std::string& out) {
  line_ = stmt.line;
  switch (stmt.kind) {
    case StmtKind::kText: PAGODA_RETURN_IF_ERROR(append(out, stmt.text)); break;
    case StmtKind::kOutput: {
      PAGODA_ASSIGN_OR_RETURN(Value v, eval(*stmt.expr, scope));
      PAGODA_RETURN_IF_ERROR(append(out, v.str()));
      break;
    }
    case StmtKind::kIf: {
      PAGODA_ASSIGN_OR_RETURN(Value cond, eval(*stmt.expr, scope));
      return exec_body(cond.truthy() ? stmt.body : stmt.else_body, scope, out);
    }
    case StmtKind::kFor: return exec_for(stmt, scope, out);
    case StmtKind::kSet: PAGODA_RETURN_IF_ERROR(exec_set(stmt, scope)); break;
    case StmtKind::kSetBlock: {
      PAGODA_ASSIGN_OR_RETURN(std::string text, capture(stmt.body, scope));
      Value value(std::move(text));
      if (stmt.filter) {
        PAGODA_ASSIGN_OR_RETURN(value, eval_filter(*stmt.filter, scope, &value));
      }
      scope->set(stmt.targets[0], std::move(value));
      break;
    }
    case StmtKind::kMacro: scope->set(stmt.name, make_macro(stmt, scope, stmt.name)); break;
    case StmtKind::kCallBlock: {
      Value caller = make_macro(stmt, scope, "caller");
      PAGODA_ASSIGN_OR_RETURN(Value result, eval_call(*stmt.expr, scope, &caller));
      PAGODA_RETURN_IF_ERROR(append(out, result.str()));
      break;
    }
    case StmtKind::kFilterBlock: {
      PAGODA_ASSIGN_OR_RETURN(std::string text, capture(stmt.body, scope));
      Value input(std::move(text));
      PAGODA_ASSIGN_OR_RETURN(Value result, eval_filter(*stmt.filter, scope, &input));
      PAGODA_RETURN_IF_ERROR(append(out, result.str()));
      break;
    }
    case StmtKind::kWith: {
      auto child = std::make_shared<Scope>();
      child->parent = scope;
      for (const auto& [name, expr] : stmt.params) {
        PAGODA_ASSIGN_OR_RETURN(Value v, eval(*expr, child));
        child->set(name, std::move(v));
      }
      return exec_body(stmt.body, child, out);
    }
    case StmtKind::kScope: {
      PAGODA_ASSIGN_OR_RETURN(std::string text, capture(stmt.body, scope));
      PAGODA_RETURN_IF_ERROR(append(out, text));
      break;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
  }
  return Flow::kNormal;
}

StatusOr<Evaluator::Flow> Evaluator::exec_for(const Stmt& stmt, const ScopePtr& scope,
                                              std::string& out) {
  PAGODA_ASSIGN_OR_RETURN(Value iterable, eval(*stmt.expr, scope));
  PAGODA_RETURN_IF_ERROR(run_loop(stmt, iterable, scope, 0, out));
  return Flow::kNormal;
}

Status Evaluator::run_loop(const Stmt& stmt, const Value& iterable, const ScopePtr& scope,
                           int depth, std::string& out) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> items, iterate(iterable));
  if (stmt.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      PAGODA_RETURN_IF_ERROR(assign(stmt.targets, item, *probe));
      PAGODA_ASSIGN_OR_RETURN(Value keep, eval(*stmt.filter, probe));
      if (keep.truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto child = std::make_shared<Scope>();
    child->parent = scope;
    PAGODA_ASSIGN_OR_RETURN(Flow flow, exec_body(stmt.else_body, child, out));
    (void)flow;
    return Status::ok_status();
  }
  auto n = static_cast<std::int64_t>(items.size());
  std::weak_ptr<Scope> weak_scope = scope;
  const Stmt* loop_stmt = &stmt;
  for (std::int64_t i = 0; i < n; ++i) {
    if (++loop_iterations_ > options_.limits.max_loop_iterations) {
      return out_of_range("template loops ran more than the limit of " +
                          std::to_string(options_.limits.max_loop_iterations) + " iterations");
    }
    auto iteration = std::make_shared<Scope>();
    iteration->parent = scope;
    PAGODA_RETURN_IF_ERROR(assign(stmt.targets, items[i], *iteration));
    Dict attrs;
    attrs.set("index", Value(i + 1));
    attrs.set("index0", Value(i));
    attrs.set("revindex", Value(n - i));
    attrs.set("revindex0", Value(n - i - 1));
    attrs.set("first", Value(i == 0));
    attrs.set("last", Value(i == n - 1));
    attrs.set("length", Value(n));
    attrs.set("depth", Value(depth + 1));
    attrs.set("depth0", Value(depth));
    if (i > 0) attrs.set("previtem", items[i - 1]);
    if (i + 1 < n) attrs.set("nextitem", items[i + 1]);
    attrs.set("cycle", Value::callable("cycle", [i](Evaluator&, CallArgs args) -> StatusOr<Value> {
                if (args.positional.empty()) return invalid_argument("no items for cycling given");
                return args.positional[static_cast<std::size_t>(i) % args.positional.size()];
              }));
    Value loop = Value::callable(
        "loop",
        [loop_stmt, weak_scope, depth](Evaluator& ev, CallArgs args) -> StatusOr<Value> {
          if (!loop_stmt->recursive) {
            return invalid_argument("TypeError: the loop must be marked 'recursive' to be called");
          }
          ScopePtr parent = weak_scope.lock();
          if (!parent || args.positional.size() != 1) {
            return invalid_argument("loop() takes one iterable inside its own loop");
          }
          std::string text;
          PAGODA_RETURN_IF_ERROR(
              ev.run_loop(*loop_stmt, args.positional[0], parent, depth + 1, text));
          return Value(std::move(text));
        },
        std::make_shared<const Dict>(std::move(attrs)));
    iteration->set("loop", std::move(loop));
    PAGODA_ASSIGN_OR_RETURN(Flow flow, exec_body(stmt.body, iteration, out));
    if (flow == Flow::kBreak) break;
  }
  return Status::ok_status();
}

Status Evaluator::assign(const std::vector<std::string>& targets, const Value& value,
                         Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return Status::ok_status();
  }
  PAGODA_ASSIGN_OR_RETURN(std::vector<Value> parts, iterate(value));
  if (parts.size() != targets.size()) {
    return invalid_argument(parts.size() < targets.size()
                                ? "ValueError: not enough values to unpack (expected " +
                                      std::to_string(targets.size()) + ", got " +
                                      std::to_string(parts.size()) + ")"
                                : "ValueError: too many values to unpack (expected " +
                                      std::to_string(targets.size()) + ")");
  }
  for (std::size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  return Status::ok_status();
}

Status Evaluator::exec_set(const Stmt& stmt, const ScopePtr& scope) {
  PAGODA_ASSIGN_OR_RETURN(Value value, eval(*stmt.expr, scope));
  if (stmt.name.empty()) return assign(stmt.targets, value, *scope);
  const Value* target = scope->find(stmt.name);
  if (target == nullptr || target->kind() != Value::Kind::kNamespace) {
    return invalid_argument("cannot assign attribute on non-namespace object");
  }
  if (stmt.attr.starts_with("_")) {
    return invalid_argument(
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
        stmt.attr + "'. Please rename the attribute.");
  }
  target->as_namespace().attrs.set(Value(stmt.attr), std::move(value));
  return Status::ok_status();
}

Value Evaluator::make_macro(const Stmt& stmt, const ScopePtr& scope, std::string name) {
  std::weak_ptr<Scope> weak_scope = scope;
  const Stmt* macro = &stmt;
  return Value::callable(
      name, [macro, weak_scope, name](Evaluator& ev, CallArgs args) -> StatusOr<Value> {
        ScopePtr parent = weak_scope.lock();
        if (!parent) return invalid_argument("macro '" + name + "' called after its block ended");
        auto scope = std::make_shared<Scope>();
        scope->parent = parent;
        const auto& params = macro->params;
        std::vector<Value> varargs;
        for (std::size_t i = 0; i < args.positional.size(); ++i) {
          if (i < params.size()) {
            scope->set(params[i].first, args.positional[i]);
          } else {
            varargs.push_back(args.positional[i]);
          }
        }
        Dict kwargs;
        for (auto& [key, value] : args.keyword) {
          bool is_param = false;
          for (const auto& param : params) is_param = is_param || param.first == key;
          if (is_param || key == "caller") {
            scope->set(key, std::move(value));
          } else {
            kwargs.set(Value(key), std::move(value));
          }
        }
        for (const auto& [param, default_value] : params) {
          bool given = false;
          for (const auto& var : scope->vars) given = given || var.first == param;
          if (given) continue;
          if (default_value) {
            PAGODA_ASSIGN_OR_RETURN(Value v, ev.eval(*default_value, scope));
            scope->set(param, std::move(v));
          } else {
            scope->set(param, Value::undefined("'" + param + "' is undefined"));
          }
        }
        scope->set("varargs", Value::list(std::move(varargs)));
        scope->set("kwargs", Value::dict(std::move(kwargs)));
        std::string text;
        PAGODA_ASSIGN_OR_RETURN(Flow flow, ev.exec_body(macro->body, scope, text));
        (void)flow;
        return Value(std::move(text));
      });
}

}  // namespace pagoda::jinja
