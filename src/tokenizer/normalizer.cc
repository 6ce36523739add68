#include "tokenizer/normalizer.h"

#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view with) {
  if (pattern.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (true) {
    const std::size_t hit = text.find(pattern, pos);
    if (hit == std::string_view::npos) break;
    out.append(text.substr(pos, hit - pos));
    out.append(with);
    pos = hit + pattern.size();
  }
  out.append(text.substr(pos));
  return out;
}

// The replacement is literal: tokenizers does not expand $1-style group references.
std::string replace_matches(std::string_view text, const UnicodeRegex& regex,
                            std::string_view with) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  for (const auto& [begin, end] : regex.find_all(text)) {
    out.append(text.substr(pos, begin - pos));
    out.append(with);
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string out;
  // Every step below expects valid UTF-8 (PCRE2 in UTF mode requires it).
  if (is_valid_utf8(text)) {
    out.assign(text);
  } else {
    append_utf8_lossy(text, out);
  }
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kPrepend:
        // tokenizers prepends only to non-empty text.
        if (!out.empty()) out.insert(0, step.content);
        break;
      case NormalizerStep::Kind::kReplace:
        out = step.regex ? replace_matches(out, *step.regex, step.content)
                         : replace_all(out, step.pattern, step.content);
        break;
      case NormalizerStep::Kind::kUnicode: out = normalize_unicode(out, step.form); break;
      case NormalizerStep::Kind::kLowercase: out = to_lowercase(out); break;
      case NormalizerStep::Kind::kStrip:
        out = std::string(strip_whitespace(out, step.strip_left, step.strip_right));
        break;
      case NormalizerStep::Kind::kStripAccents: out = remove_combining_marks(out); break;
    }
  }
  return out;
}

}  // namespace pagoda
