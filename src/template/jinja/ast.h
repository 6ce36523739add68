// The syntax tree the parser builds and the evaluator walks. Nodes are generic records: the kind
// says which fields are in use, which keeps the tree small to declare and cheap to walk.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja/value.h"

namespace pagoda::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

/// Expression node kinds; comments name the fields each one uses.
enum class ExprKind {
  kLiteral,   // literal
  kName,      // name
  kList,      // children
  kTuple,     // children
  kDict,      // children: key, value, key, value...
  kGetattr,   // children[0] . name
  kGetitem,   // children[0] [ children[1] ]
  kSlice,     // children[0] [ children[1] : children[2] : children[3] ], each may be null
  kCall,      // children[0] ( children[1..], kwargs )
  kFilter,    // children[0] | name ( children[1..], kwargs ); children[0] null in filter blocks
  kTest,      // children[0] is [not] name ( children[1..], kwargs ); negated
  kNot,       // children[0]
  kNegate,    // children[0]
  kPlus,      // children[0]
  kBinary,    // children[0] op children[1]
  kAnd,       // children[0] and children[1]
  kOr,        // children[0] or children[1]
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2]...
  kCondition  // children[0] if children[1] else children[2] (may be null)
};

/// One expression.
struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<std::string> ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
  /// Longest path to a leaf; bounded so that walking and freeing the tree stays shallow.
  int height = 1;
};

/// Statement node kinds; comments name the fields each one uses.
enum class StmtKind {
  kText,         // text
  kOutput,       // expr
  kIf,           // expr, body, else_body (an elif is an if inside else_body)
  kFor,          // targets, expr (iterable), filter (optional), body, else_body, recursive
  kSet,          // targets (or name + attr for ns.attr), expr
  kSetBlock,     // targets[0], body, filter (optional, a kFilter with null input)
  kMacro,        // name, params, body
  kCallBlock,    // expr (the call), params (caller's), body
  kFilterBlock,  // filter, body
  kWith,         // params (assignments), body
  kBreak,
  kContinue,
  kScope  // body: generation blocks render their body
};

/// One statement.
struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  std::string name;
  std::string attr;
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr filter;
  StmtList body;
  StmtList else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;
  bool recursive = false;
};

}  // namespace pagoda::jinja
