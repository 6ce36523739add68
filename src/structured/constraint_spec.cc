#include "structured/constraint_spec.h"

namespace pagoda::structured {

std::string_view constraint_kind_name(ConstraintKind kind) {
  switch (kind) {
    case ConstraintKind::kJsonObject: return "json_object";
    case ConstraintKind::kJsonSchema: return "json_schema";
    case ConstraintKind::kRegex: return "regex";
    case ConstraintKind::kChoice: return "choice";
    case ConstraintKind::kGrammar: return "grammar";
  }
  return "unknown";
}

std::string ConstraintSpec::cache_key() const {
  // Lengths before contents, so no two different specs share a key.
  std::string key(constraint_kind_name(kind));
  key += ':' + std::to_string(text.size()) + ':' + text;
  for (const std::string& choice : choices) {
    key += ':' + std::to_string(choice.size()) + ':' + choice;
  }
  return key;
}

}  // namespace pagoda::structured
