// Expression half of the parser: jinja2's precedence ladder from conditional expressions down to
// primaries, postfix subscripts, calls, filters and tests.
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "template/jinja/parser.h"

namespace pagoda::jinja {
namespace {

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Appends a child (which may be null) and keeps the parent's height current.
void adopt(Expr& parent, ExprPtr child) {
  if (child) parent.height = std::max(parent.height, child->height + 1);
  parent.children.push_back(std::move(child));
}

ExprPtr make_binary(ExprKind kind, std::string op, ExprPtr left, ExprPtr right) {
  auto e = make_expr(kind, left->line);
  e->name = std::move(op);
  adopt(*e, std::move(left));
  adopt(*e, std::move(right));
  return e;
}

bool ends_tuple(const Token& t) {
  return t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
         (t.type == TokenType::kOperator && t.text == ")");
}

}  // namespace

Status Parser::check_height(const Expr& e) const {
  return e.height > 4 * max_depth_ ? too_deep() : Status::ok_status();
}

StatusOr<ExprPtr> Parser::parse_tuple_or_expression() {
  int line = peek().line;
  PAGODA_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
  if (!at_op(",")) return first;
  auto tuple = make_expr(ExprKind::kTuple, line);
  adopt(*tuple, std::move(first));
  while (skip_op(",")) {
    if (ends_tuple(peek())) break;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
    adopt(*tuple, std::move(item));
  }
  return tuple;
}

StatusOr<ExprPtr> Parser::parse_expression(bool with_condition) {
  DepthGuard guard(*this);
  if (!guard.ok()) return too_deep();
  PAGODA_ASSIGN_OR_RETURN(ExprPtr expr, parse_or());
  while (with_condition && skip_name("if")) {
    auto cond = make_expr(ExprKind::kCondition, expr->line);
    PAGODA_ASSIGN_OR_RETURN(ExprPtr test, parse_or());
    ExprPtr otherwise;
    if (skip_name("else")) {
      PAGODA_ASSIGN_OR_RETURN(otherwise, parse_expression());
    }
    adopt(*cond, std::move(expr));
    adopt(*cond, std::move(test));
    adopt(*cond, std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

StatusOr<ExprPtr> Parser::parse_or() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (skip_name("or")) {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    left = make_binary(ExprKind::kOr, "or", std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_and() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (skip_name("and")) {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    left = make_binary(ExprKind::kAnd, "and", std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  DepthGuard guard(*this);
  if (!guard.ok()) return too_deep();
  auto node = make_expr(ExprKind::kNot, next().line);
  PAGODA_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
  adopt(*node, std::move(operand));
  return node;
}

StatusOr<ExprPtr> Parser::parse_compare() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr first, parse_math1());
  ExprPtr node;
  while (true) {
    std::string op;
    const Token& t = peek();
    if (t.type == TokenType::kOperator && (t.text == "==" || t.text == "!=" || t.text == "<" ||
                                           t.text == ">" || t.text == "<=" || t.text == ">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (at_name("not") && peek(1).type == TokenType::kName && peek(1).text == "in") {
      next();
      next();
      op = "not in";
    } else {
      break;
    }
    if (!node) {
      node = make_expr(ExprKind::kCompare, first->line);
      adopt(*node, std::move(first));
    }
    PAGODA_ASSIGN_OR_RETURN(ExprPtr operand, parse_math1());
    PAGODA_RETURN_IF_ERROR(check_height(*node));
    node->ops.push_back(std::move(op));
    adopt(*node, std::move(operand));
  }
  return node ? std::move(node) : std::move(first);
}

StatusOr<ExprPtr> Parser::parse_math1() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_concat());
  while (at_op("+") || at_op("-")) {
    std::string op = next().text;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_concat());
    left = make_binary(ExprKind::kBinary, op, std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_concat() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_math2());
  while (skip_op("~")) {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_math2());
    left = make_binary(ExprKind::kBinary, "~", std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_math2() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_pow());
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    std::string op = next().text;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_pow());
    left = make_binary(ExprKind::kBinary, op, std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_pow() {
  PAGODA_ASSIGN_OR_RETURN(ExprPtr left, parse_unary(true));
  while (skip_op("**")) {
    PAGODA_ASSIGN_OR_RETURN(ExprPtr right, parse_unary(true));
    left = make_binary(ExprKind::kBinary, "**", std::move(left), std::move(right));
    PAGODA_RETURN_IF_ERROR(check_height(*left));
  }
  return left;
}

StatusOr<ExprPtr> Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  if (!guard.ok()) return too_deep();
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    ExprKind kind = at_op("-") ? ExprKind::kNegate : ExprKind::kPlus;
    node = make_expr(kind, next().line);
    PAGODA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    adopt(*node, std::move(operand));
  } else {
    PAGODA_ASSIGN_OR_RETURN(node, parse_primary());
  }
  PAGODA_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) return parse_filter_expr(std::move(node));
  return node;
}

StatusOr<ExprPtr> Parser::parse_primary() {
  const Token& t = peek();
  int line = t.line;
  if (t.type == TokenType::kName) {
    std::string name = next().text;
    auto node = make_expr(ExprKind::kLiteral, line);
    if (name == "true" || name == "True") {
      node->literal = Value(true);
    } else if (name == "false" || name == "False") {
      node->literal = Value(false);
    } else if (name == "none" || name == "None") {
      node->literal = Value(Value::None{});
    } else {
      node->kind = ExprKind::kName;
      node->name = std::move(name);
    }
    return node;
  }
  if (t.type == TokenType::kString) {
    std::string text;
    while (peek().type == TokenType::kString) text += next().text;
    auto node = make_expr(ExprKind::kLiteral, line);
    node->literal = Value(std::move(text));
    return node;
  }
  if (t.type == TokenType::kInteger || t.type == TokenType::kFloat) {
    std::string text = next().text;
    auto node = make_expr(ExprKind::kLiteral, line);
    errno = 0;
    if (t.type == TokenType::kInteger) {
      long long v = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) return template_error("integer literal too large: " + text, line);
      node->literal = Value(static_cast<std::int64_t>(v));
    } else {
      node->literal = Value(std::strtod(text.c_str(), nullptr));
    }
    return node;
  }
  if (skip_op("(")) {
    if (skip_op(")")) return make_expr(ExprKind::kTuple, line);
    PAGODA_ASSIGN_OR_RETURN(ExprPtr inner, parse_expression());
    if (at_op(",")) {
      auto tuple = make_expr(ExprKind::kTuple, line);
      adopt(*tuple, std::move(inner));
      while (skip_op(",")) {
        if (at_op(")")) break;
        PAGODA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
        adopt(*tuple, std::move(item));
      }
      inner = std::move(tuple);
    }
    PAGODA_RETURN_IF_ERROR(expect_op(")"));
    return inner;
  }
  if (skip_op("[")) return parse_sequence(ExprKind::kList, "]");
  if (skip_op("{")) return parse_dict();
  return error("unexpected '" + describe(t) + "'");
}

StatusOr<ExprPtr> Parser::parse_sequence(ExprKind kind, std::string_view close) {
  auto node = make_expr(kind, peek().line);
  while (!at_op(close)) {
    if (!node->children.empty()) PAGODA_RETURN_IF_ERROR(expect_op(","));
    if (at_op(close)) break;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
    adopt(*node, std::move(item));
  }
  next();
  return node;
}

StatusOr<ExprPtr> Parser::parse_dict() {
  auto node = make_expr(ExprKind::kDict, peek().line);
  while (!at_op("}")) {
    if (!node->children.empty()) PAGODA_RETURN_IF_ERROR(expect_op(","));
    if (at_op("}")) break;
    PAGODA_ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
    PAGODA_RETURN_IF_ERROR(expect_op(":"));
    PAGODA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    adopt(*node, std::move(key));
    adopt(*node, std::move(value));
  }
  next();
  return node;
}

StatusOr<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      PAGODA_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
    } else if (at_op("(")) {
      auto call = make_expr(ExprKind::kCall, peek().line);
      adopt(*call, std::move(node));
      PAGODA_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      return node;
    }
    PAGODA_RETURN_IF_ERROR(check_height(*node));
  }
}

StatusOr<ExprPtr> Parser::parse_subscript(ExprPtr node) {
  int line = peek().line;
  if (skip_op(".")) {
    if (peek().type == TokenType::kName) {
      auto attr = make_expr(ExprKind::kGetattr, line);
      attr->name = next().text;
      adopt(*attr, std::move(node));
      return attr;
    }
    if (peek().type != TokenType::kInteger) return error("expected name or number");
    auto item = make_expr(ExprKind::kGetitem, line);
    auto index = make_expr(ExprKind::kLiteral, line);
    index->literal =
        Value(static_cast<std::int64_t>(std::strtoll(next().text.c_str(), nullptr, 10)));
    adopt(*item, std::move(node));
    adopt(*item, std::move(index));
    return item;
  }
  next();
  std::vector<ExprPtr> parts;
  bool is_slice = false;
  for (int i = 0; i < 3; ++i) {
    ExprPtr part;
    if (!at_op(":") && !at_op("]")) {
      PAGODA_ASSIGN_OR_RETURN(part, parse_expression());
    }
    parts.push_back(std::move(part));
    if (!skip_op(":")) break;
    is_slice = true;
  }
  PAGODA_RETURN_IF_ERROR(expect_op("]"));
  if (!is_slice && !parts[0]) return error("expected subscript expression");
  auto out = make_expr(is_slice ? ExprKind::kSlice : ExprKind::kGetitem, line);
  adopt(*out, std::move(node));
  for (auto& part : parts) adopt(*out, std::move(part));
  while (is_slice && out->children.size() < 4) adopt(*out, nullptr);
  return out;
}

StatusOr<ExprPtr> Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      PAGODA_ASSIGN_OR_RETURN(node, parse_filter(std::move(node)));
    } else if (at_name("is")) {
      PAGODA_ASSIGN_OR_RETURN(node, parse_test(std::move(node)));
    } else if (at_op("(")) {
      auto call = make_expr(ExprKind::kCall, peek().line);
      adopt(*call, std::move(node));
      PAGODA_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      return node;
    }
    PAGODA_RETURN_IF_ERROR(check_height(*node));
  }
}

StatusOr<ExprPtr> Parser::parse_filter(ExprPtr node) {
  do {
    skip_op("|");
    auto filter = make_expr(ExprKind::kFilter, peek().line);
    PAGODA_ASSIGN_OR_RETURN(filter->name, expect_name());
    while (skip_op(".")) {
      PAGODA_ASSIGN_OR_RETURN(std::string part, expect_name());
      filter->name += "." + part;
    }
    adopt(*filter, std::move(node));
    if (at_op("(")) PAGODA_RETURN_IF_ERROR(parse_call_args(*filter));
    node = std::move(filter);
    PAGODA_RETURN_IF_ERROR(check_height(*node));
  } while (at_op("|"));
  return node;
}

StatusOr<ExprPtr> Parser::parse_test(ExprPtr node) {
  auto test = make_expr(ExprKind::kTest, next().line);
  test->negated = skip_name("not");
  PAGODA_ASSIGN_OR_RETURN(test->name, expect_name());
  adopt(*test, std::move(node));
  const Token& t = peek();
  if (at_op("(")) {
    PAGODA_RETURN_IF_ERROR(parse_call_args(*test));
  } else if ((t.type == TokenType::kName && t.text != "else" && t.text != "or" &&
              t.text != "and") ||
             t.type == TokenType::kString || t.type == TokenType::kInteger ||
             t.type == TokenType::kFloat || at_op("[") || at_op("{")) {
    if (at_name("is")) return error("You cannot chain multiple tests with is");
    PAGODA_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
    PAGODA_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
    adopt(*test, std::move(arg));
  }
  return test;
}

Status Parser::parse_call_args(Expr& node) {
  DepthGuard guard(*this);
  if (!guard.ok()) return too_deep();
  next();
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      PAGODA_RETURN_IF_ERROR(expect_op(","));
      if (at_op(")")) break;
    }
    first = false;
    if (at_op("*") || at_op("**")) return error("*args and **kwargs are not supported");
    if (peek().type == TokenType::kName && peek(1).type == TokenType::kOperator &&
        peek(1).text == "=") {
      std::string key = next().text;
      next();
      PAGODA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      node.kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!node.kwargs.empty()) return error("invalid syntax for function call expression");
      PAGODA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      adopt(node, std::move(value));
    }
  }
  next();
  return Status::ok_status();
}

}  // namespace pagoda::jinja
