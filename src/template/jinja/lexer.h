// Splits template source into tokens, applying the whitespace rules of transformers' environment:
// trim_blocks, lstrip_blocks, `-`/`+` markers, newline normalisation and the dropped final newline.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"

namespace pagoda::jinja {

/// Token categories; operators keep their spelling in Token::text.
enum class TokenType {
  kText,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEnd,
};

/// One token with the template line it starts on (1-based).
struct Token {
  TokenType type;
  std::string text;
  int line;
};

/// Tokenizes a whole template; a syntax error names the line.
StatusOr<std::vector<Token>> tokenize(std::string_view source);

/// "message (template line N)": the one format of every template error.
Status template_error(const std::string& message, int line);

}  // namespace pagoda::jinja
