#include "template/jinja/parser.h"

#include <algorithm>

namespace pagoda::jinja {
namespace {

StmtPtr make_stmt(StmtKind kind, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = kind;
  stmt->line = line;
  return stmt;
}

}  // namespace

StatusOr<StmtList> parse_template(std::vector<Token> tokens, int max_depth) {
  return Parser(std::move(tokens), max_depth).parse_all();
}

StatusOr<StmtList> Parser::parse_all() {
  return parse_body({}, "");
}

const Token& Parser::peek(std::size_t ahead) const {
  return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
}

bool Parser::at_op(std::string_view op) const {
  return peek().type == TokenType::kOperator && peek().text == op;
}

bool Parser::at_name(std::string_view name) const {
  return peek().type == TokenType::kName && peek().text == name;
}

bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kEnd: return "end of template";
    case TokenType::kText: return "template data";
    default: return t.text;
  }
}

Status Parser::error(const std::string& message) const {
  return template_error(message, peek().line);
}

Status Parser::too_deep() const {
  return error("template nesting is deeper than the limit of " + std::to_string(max_depth_));
}

Status Parser::expect_op(std::string_view op) {
  if (skip_op(op)) return Status::ok_status();
  return error("expected '" + std::string(op) + "', got '" + describe(peek()) + "'");
}

StatusOr<std::string> Parser::expect_name() {
  if (peek().type != TokenType::kName)
    return error("expected a name, got '" + describe(peek()) + "'");
  return next().text;
}

Status Parser::expect_block_end() {
  if (peek().type == TokenType::kBlockEnd) {
    next();
    return Status::ok_status();
  }
  return error("expected 'end of statement block', got '" + describe(peek()) + "'");
}

Status Parser::expect_end_tag(std::string_view name) {
  next();  // The block begin; parse_body stopped in front of it.
  if (!skip_name(name)) return error("expected '" + std::string(name) + "'");
  return expect_block_end();
}

StatusOr<StmtList> Parser::parse_body(std::initializer_list<std::string_view> end_tags,
                                      std::string_view innermost) {
  DepthGuard guard(*this);
  if (!guard.ok()) return too_deep();
  StmtList body;
  while (true) {
    const Token& t = peek();
    if (t.type == TokenType::kEnd) {
      if (end_tags.size() == 0) return body;
      std::string wanted;
      for (std::string_view tag : end_tags) {
        wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
      }
      return error(
          "Unexpected end of template. Jinja was looking for the following tags: " + wanted +
          ". The innermost block that needs to be closed is '" + std::string(innermost) + "'.");
    }
    if (t.type == TokenType::kText) {
      auto stmt = make_stmt(StmtKind::kText, t.line);
      stmt->text = next().text;
      body.push_back(std::move(stmt));
    } else if (t.type == TokenType::kVariableBegin) {
      int line = next().line;
      PAGODA_ASSIGN_OR_RETURN(ExprPtr expr, parse_tuple_or_expression());
      if (peek().type != TokenType::kVariableEnd) {
        return error("unexpected '" + describe(peek()) + "', expected 'end of print statement'");
      }
      next();
      auto stmt = make_stmt(StmtKind::kOutput, line);
      stmt->expr = std::move(expr);
      body.push_back(std::move(stmt));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& tag = peek(1);
      if (tag.type == TokenType::kName &&
          std::find(end_tags.begin(), end_tags.end(), tag.text) != end_tags.end()) {
        return body;
      }
      PAGODA_ASSIGN_OR_RETURN(StmtPtr stmt, parse_statement());
      body.push_back(std::move(stmt));
    } else {
      return error("unexpected '" + describe(t) + "'");
    }
  }
}

StatusOr<StmtPtr> Parser::parse_statement() {
  int line = next().line;
  if (peek().type != TokenType::kName) return error("tag name expected");
  std::string tag = next().text;
  if (tag == "if") return parse_if(line);
  if (tag == "for") return parse_for(line);
  if (tag == "set") return parse_set(line);
  if (tag == "macro") return parse_macro(line);
  if (tag == "call") return parse_call_block(line);
  if (tag == "filter") return parse_filter_block(line);
  if (tag == "with") return parse_with(line);
  if (tag == "break" || tag == "continue") {
    PAGODA_RETURN_IF_ERROR(expect_block_end());
    return make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
  }
  if (tag == "generation") {
    PAGODA_RETURN_IF_ERROR(expect_block_end());
    auto stmt = make_stmt(StmtKind::kScope, line);
    PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endgeneration"}, "generation"));
    PAGODA_RETURN_IF_ERROR(expect_end_tag("endgeneration"));
    return stmt;
  }
  return template_error("Encountered unknown tag '" + tag + "'.", line);
}

StatusOr<StmtPtr> Parser::parse_if(int line) {
  auto stmt = make_stmt(StmtKind::kIf, line);
  PAGODA_ASSIGN_OR_RETURN(stmt->expr, parse_expression(false));
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"elif", "else", "endif"}, "if"));
  int tag_line = next().line;
  std::string tag = next().text;
  if (tag == "elif") {
    DepthGuard guard(*this);
    if (!guard.ok()) return too_deep();
    PAGODA_ASSIGN_OR_RETURN(StmtPtr elif, parse_if(tag_line));
    stmt->else_body.push_back(std::move(elif));
    return stmt;
  }
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  if (tag == "else") {
    PAGODA_ASSIGN_OR_RETURN(stmt->else_body, parse_body({"endif"}, "if"));
    PAGODA_RETURN_IF_ERROR(expect_end_tag("endif"));
  }
  return stmt;
}

StatusOr<std::vector<std::string>> Parser::parse_targets() {
  std::vector<std::string> targets;
  bool parens = skip_op("(");
  do {
    if (parens && at_op(")")) break;
    PAGODA_ASSIGN_OR_RETURN(std::string name, expect_name());
    targets.push_back(std::move(name));
  } while (skip_op(","));
  if (parens) PAGODA_RETURN_IF_ERROR(expect_op(")"));
  return targets;
}

StatusOr<StmtPtr> Parser::parse_for(int line) {
  auto stmt = make_stmt(StmtKind::kFor, line);
  PAGODA_ASSIGN_OR_RETURN(stmt->targets, parse_targets());
  if (!skip_name("in")) return error("expected 'in'");
  PAGODA_ASSIGN_OR_RETURN(stmt->expr, parse_expression(false));
  if (skip_name("if")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->filter, parse_expression());
  }
  stmt->recursive = skip_name("recursive");
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endfor", "else"}, "for"));
  if (peek(1).text == "else") {
    next();
    next();
    PAGODA_RETURN_IF_ERROR(expect_block_end());
    PAGODA_ASSIGN_OR_RETURN(stmt->else_body, parse_body({"endfor"}, "for"));
  }
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endfor"));
  return stmt;
}

StatusOr<StmtPtr> Parser::parse_set(int line) {
  auto stmt = make_stmt(StmtKind::kSet, line);
  if (peek().type == TokenType::kName && peek(1).type == TokenType::kOperator &&
      peek(1).text == ".") {
    stmt->name = next().text;
    next();
    PAGODA_ASSIGN_OR_RETURN(stmt->attr, expect_name());
  } else {
    PAGODA_ASSIGN_OR_RETURN(stmt->targets, parse_targets());
  }
  if (skip_op("=")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->expr, parse_tuple_or_expression());
    PAGODA_RETURN_IF_ERROR(expect_block_end());
    return stmt;
  }
  if (stmt->targets.size() != 1) return error("expected '='");
  stmt->kind = StmtKind::kSetBlock;
  if (at_op("|")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->filter, parse_filter(nullptr));
  }
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endset"}, "set"));
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endset"));
  return stmt;
}

StatusOr<std::vector<std::pair<std::string, ExprPtr>>> Parser::parse_signature() {
  std::vector<std::pair<std::string, ExprPtr>> params;
  PAGODA_RETURN_IF_ERROR(expect_op("("));
  while (!at_op(")")) {
    if (!params.empty()) PAGODA_RETURN_IF_ERROR(expect_op(","));
    if (at_op(")")) break;
    PAGODA_ASSIGN_OR_RETURN(std::string name, expect_name());
    ExprPtr default_value;
    if (skip_op("=")) {
      PAGODA_ASSIGN_OR_RETURN(default_value, parse_expression());
    } else if (!params.empty() && params.back().second) {
      return error("non-default argument follows default argument");
    }
    params.emplace_back(std::move(name), std::move(default_value));
  }
  next();
  return params;
}

StatusOr<StmtPtr> Parser::parse_macro(int line) {
  auto stmt = make_stmt(StmtKind::kMacro, line);
  PAGODA_ASSIGN_OR_RETURN(stmt->name, expect_name());
  PAGODA_ASSIGN_OR_RETURN(stmt->params, parse_signature());
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endmacro"}, "macro"));
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endmacro"));
  return stmt;
}

StatusOr<StmtPtr> Parser::parse_call_block(int line) {
  auto stmt = make_stmt(StmtKind::kCallBlock, line);
  if (at_op("(")) {
    PAGODA_ASSIGN_OR_RETURN(stmt->params, parse_signature());
  }
  PAGODA_ASSIGN_OR_RETURN(stmt->expr, parse_expression());
  if (stmt->expr->kind != ExprKind::kCall) return error("expected call");
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endcall"}, "call"));
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endcall"));
  return stmt;
}

StatusOr<StmtPtr> Parser::parse_filter_block(int line) {
  auto stmt = make_stmt(StmtKind::kFilterBlock, line);
  PAGODA_ASSIGN_OR_RETURN(stmt->filter, parse_filter(nullptr));
  PAGODA_RETURN_IF_ERROR(expect_block_end());
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endfilter"}, "filter"));
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endfilter"));
  return stmt;
}

StatusOr<StmtPtr> Parser::parse_with(int line) {
  auto stmt = make_stmt(StmtKind::kWith, line);
  while (peek().type != TokenType::kBlockEnd) {
    if (!stmt->params.empty()) PAGODA_RETURN_IF_ERROR(expect_op(","));
    PAGODA_ASSIGN_OR_RETURN(std::string name, expect_name());
    PAGODA_RETURN_IF_ERROR(expect_op("="));
    PAGODA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    stmt->params.emplace_back(std::move(name), std::move(value));
  }
  next();
  PAGODA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endwith"}, "with"));
  PAGODA_RETURN_IF_ERROR(expect_end_tag("endwith"));
  return stmt;
}

}  // namespace pagoda::jinja
