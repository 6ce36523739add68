// A compiled Jinja template: parse once, render many times, from any number of threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pagoda/status.h"
#include "template/jinja/ast.h"
#include "template/jinja/render_options.h"
#include "template/jinja/value.h"

namespace pagoda::jinja {

/// Limits that apply while parsing.
struct ParseOptions {
  /// Nesting of blocks and expressions; deeper input is a syntax error, not a stack overflow.
  int max_nesting_depth = 128;
};

/// An immutable parsed template; rendering does not modify it.
class Template {
 public:
  /// Parses `source`; a syntax error names the template line.
  static StatusOr<Template> compile(std::string_view source, const ParseOptions& options = {});

  /// Renders with `variables` as the template's globals.
  StatusOr<std::string> render(std::vector<std::pair<std::string, Value>> variables,
                               const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const StmtList> body) : body_(std::move(body)) {}

  std::shared_ptr<const StmtList> body_;
};

}  // namespace pagoda::jinja
