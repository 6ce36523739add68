#include "template/jinja/template.h"

#include "template/jinja/evaluator.h"
#include "template/jinja/filters.h"
#include "template/jinja/lexer.h"
#include "template/jinja/parser.h"
#include "template/jinja/tests.h"

namespace pagoda::jinja {
namespace {

// jinja2 resolves filter and test names when it compiles, so an unknown name fails even in a
// branch that never runs; do the same.
Status check_names(const Expr* expr) {
  if (expr == nullptr) return Status::ok_status();
  if (expr->kind == ExprKind::kFilter && find_filter(expr->name) == nullptr) {
    return template_error("No filter named '" + expr->name + "'.", expr->line);
  }
  if (expr->kind == ExprKind::kTest && find_test(expr->name) == nullptr) {
    return template_error("No test named '" + expr->name + "'.", expr->line);
  }
  for (const ExprPtr& child : expr->children) PAGODA_RETURN_IF_ERROR(check_names(child.get()));
  for (const auto& kwarg : expr->kwargs) PAGODA_RETURN_IF_ERROR(check_names(kwarg.second.get()));
  return Status::ok_status();
}

Status check_names(const StmtList& body) {
  for (const StmtPtr& stmt : body) {
    PAGODA_RETURN_IF_ERROR(check_names(stmt->expr.get()));
    PAGODA_RETURN_IF_ERROR(check_names(stmt->filter.get()));
    for (const auto& param : stmt->params) PAGODA_RETURN_IF_ERROR(check_names(param.second.get()));
    PAGODA_RETURN_IF_ERROR(check_names(stmt->body));
    PAGODA_RETURN_IF_ERROR(check_names(stmt->else_body));
  }
  return Status::ok_status();
}

}  // namespace

StatusOr<Template> Template::compile(std::string_view source, const ParseOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  PAGODA_ASSIGN_OR_RETURN(StmtList body,
                          parse_template(std::move(tokens), options.max_nesting_depth));
  PAGODA_RETURN_IF_ERROR(check_names(body));
  return Template(std::make_shared<const StmtList>(std::move(body)));
}

StatusOr<std::string> Template::render(std::vector<std::pair<std::string, Value>> variables,
                                       const RenderOptions& options) const {
  Evaluator evaluator(options);
  return evaluator.render(*body_, std::move(variables));
}

}  // namespace pagoda::jinja
