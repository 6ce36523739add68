#include "tokenizer/normalizer.h"

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

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kPrepend:
        // tokenizers prepends only to non-empty text.
        if (!out.empty()) out.insert(0, step.content);
        break;
      case NormalizerStep::Kind::kReplace:
        out = replace_all(out, step.pattern, step.content);
        break;
    }
  }
  return out;
}

}  // namespace pagoda
