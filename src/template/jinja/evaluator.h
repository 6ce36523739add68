// Walks the syntax tree of one template for one render: scopes, statements, expressions, and the
// sandbox's counters. Statements live in evaluator.cc, expressions in expression_evaluator.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/jinja/ast.h"
#include "template/jinja/render_options.h"
#include "template/jinja/value.h"

namespace pagoda::jinja {

/// Variables visible at one point: a block's own names, then its parent's.
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  /// The innermost binding of `name`, or nullptr.
  const Value* find(std::string_view name) const;
  /// Binds `name` in this scope, shadowing outer bindings.
  void set(std::string_view name, Value value);
};

/// One render of one template.
class Evaluator {
 public:
  explicit Evaluator(const RenderOptions& options) : options_(options) {}

  /// Renders `body` with `globals` as the outermost variables.
  StatusOr<std::string> render(const StmtList& body,
                               std::vector<std::pair<std::string, Value>> globals);

  /// Calls a callable value; used by filters that apply other callables.
  StatusOr<Value> call(const Value& callee, CallArgs args);
  /// Applies the filter `name`; `map('upper')` and filter blocks go through here.
  StatusOr<Value> apply_filter(std::string_view name, const Value& input, const CallArgs& args);
  /// Applies the test `name`; `select('odd')` goes through here.
  StatusOr<bool> apply_test(std::string_view name, const Value& input, const CallArgs& args);
  const RenderOptions& options() const { return options_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using ScopePtr = std::shared_ptr<Scope>;

  StatusOr<Flow> exec_body(const StmtList& body, const ScopePtr& scope, std::string& out);
  StatusOr<Flow> exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  StatusOr<Flow> exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Status run_loop(const Stmt& stmt, const Value& iterable, const ScopePtr& scope, int depth,
                  std::string& out);
  Status exec_set(const Stmt& stmt, const ScopePtr& scope);
  Status assign(const std::vector<std::string>& targets, const Value& value, Scope& scope);
  StatusOr<std::string> capture(const StmtList& body, const ScopePtr& scope);
  Value make_macro(const Stmt& stmt, const ScopePtr& scope, std::string name);
  Status append(std::string& out, std::string_view text);

  StatusOr<Value> eval(const Expr& expr, const ScopePtr& scope);
  StatusOr<Value> eval_name(const Expr& expr, const ScopePtr& scope);
  StatusOr<Value> eval_call(const Expr& expr, const ScopePtr& scope, const Value* caller);
  StatusOr<CallArgs> eval_args(const Expr& expr, std::size_t first, const ScopePtr& scope);
  StatusOr<Value> eval_filter(const Expr& expr, const ScopePtr& scope, const Value* input);
  StatusOr<Value> eval_compare(const Expr& expr, const ScopePtr& scope);
  StatusOr<Value> eval_container(const Expr& expr, const ScopePtr& scope);

  /// Counts call depth while alive.
  class CallGuard {
   public:
    explicit CallGuard(Evaluator& e) : e_(e) { ++e_.call_depth_; }
    ~CallGuard() { --e_.call_depth_; }
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;

   private:
    Evaluator& e_;
  };
  Status check_call_depth() const;

  const RenderOptions& options_;
  std::int64_t loop_iterations_ = 0;
  int call_depth_ = 0;
  int line_ = 0;
};

}  // namespace pagoda::jinja
