// Recursive-descent parser from tokens to the syntax tree, following jinja2's grammar and operator
// precedence. Nesting is bounded so that hostile input ("((((...") cannot exhaust the stack.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"
#include "template/jinja/ast.h"
#include "template/jinja/lexer.h"

namespace pagoda::jinja {

/// Parses a whole template; `max_depth` bounds the nesting of expressions and blocks.
StatusOr<StmtList> parse_template(std::vector<Token> tokens, int max_depth);

/// Parser state; statements live in parser.cc, expressions in expression_parser.cc.
class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  StatusOr<StmtList> parse_all();

 private:
  /// Counts nesting while alive; the parser checks `ok` before descending further.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p) : p_(p) { ++p_.depth_; }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    bool ok() const { return p_.depth_ <= p_.max_depth_; }

   private:
    Parser& p_;
  };

  // Statements.
  StatusOr<StmtList> parse_body(std::initializer_list<std::string_view> end_tags,
                                std::string_view innermost);
  StatusOr<StmtPtr> parse_statement();
  StatusOr<StmtPtr> parse_if(int line);
  StatusOr<StmtPtr> parse_for(int line);
  StatusOr<StmtPtr> parse_set(int line);
  StatusOr<StmtPtr> parse_macro(int line);
  StatusOr<StmtPtr> parse_call_block(int line);
  StatusOr<StmtPtr> parse_filter_block(int line);
  StatusOr<StmtPtr> parse_with(int line);
  StatusOr<std::vector<std::pair<std::string, ExprPtr>>> parse_signature();
  StatusOr<std::vector<std::string>> parse_targets();
  Status expect_block_end();
  Status expect_end_tag(std::string_view name);

  // Expressions, lowest precedence first.
  StatusOr<ExprPtr> parse_tuple_or_expression();
  StatusOr<ExprPtr> parse_expression(bool with_condition = true);
  StatusOr<ExprPtr> parse_or();
  StatusOr<ExprPtr> parse_and();
  StatusOr<ExprPtr> parse_not();
  StatusOr<ExprPtr> parse_compare();
  StatusOr<ExprPtr> parse_math1();
  StatusOr<ExprPtr> parse_concat();
  StatusOr<ExprPtr> parse_math2();
  StatusOr<ExprPtr> parse_pow();
  StatusOr<ExprPtr> parse_unary(bool with_filter);
  StatusOr<ExprPtr> parse_primary();
  StatusOr<ExprPtr> parse_sequence(ExprKind kind, std::string_view close);
  StatusOr<ExprPtr> parse_dict();
  StatusOr<ExprPtr> parse_postfix(ExprPtr node);
  StatusOr<ExprPtr> parse_subscript(ExprPtr node);
  StatusOr<ExprPtr> parse_filter_expr(ExprPtr node);
  StatusOr<ExprPtr> parse_filter(ExprPtr node);
  StatusOr<ExprPtr> parse_test(ExprPtr node);
  Status parse_call_args(Expr& node);

  // Token access.
  const Token& peek(std::size_t ahead = 0) const;
  const Token& next() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }
  bool at_op(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  Status expect_op(std::string_view op);
  StatusOr<std::string> expect_name();
  Status error(const std::string& message) const;
  Status too_deep() const;
  Status check_height(const Expr& e) const;
  static std::string describe(const Token& t);

  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace pagoda::jinja
