// What a request asks its output to match: a JSON schema, any JSON object, a regular expression,
// one of a list of strings, or an EBNF grammar. The frontends turn OpenAI's response_format and
// vLLM's structured_outputs / guided_* fields into one of these (src/api/structured_output.h);
// ConstraintCompiler turns it into a CompiledConstraint.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pagoda::structured {

enum class ConstraintKind : std::uint8_t {
  kJsonObject,  ///< Any JSON object (response_format json_object).
  kJsonSchema,  ///< `text` is a JSON schema (json_schema, guided_json).
  kRegex,       ///< `text` is a regular expression the whole output matches (guided_regex).
  kChoice,      ///< The output is exactly one of `choices` (guided_choice).
  kGrammar,     ///< `text` is an EBNF grammar whose rule `root` the output matches.
};

/// The name used in error messages and cache keys ("json_schema", "regex", ...).
std::string_view constraint_kind_name(ConstraintKind kind);

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  /// The schema (serialized JSON), regex or grammar; empty for kJsonObject and kChoice.
  std::string text;
  /// kChoice only: the allowed outputs, at least one.
  std::vector<std::string> choices;

  /// One string that names the constraint exactly (kind, text, choices): the cache key.
  std::string cache_key() const;
};

}  // namespace pagoda::structured
