#include "tokenizer/added_vocabulary.h"

#include <algorithm>

namespace pagoda {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// ASCII approximation of tokenizers' word test (\w); added tokens with single_word are rare.
bool is_word_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '_';
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    by_id_[tokens_[i].id] = i;
    has_normalized_ = has_normalized_ || tokens_[i].normalized;
    if (!tokens_[i].content.empty()) {
      by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
    }
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, bool at_text_start,
                                                bool normalized, bool parse_special) const {
  std::vector<TextSegment> out;
  std::size_t emitted = 0;  // Text before this offset is already in `out`.
  std::size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (std::size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& token = tokens_[index];
      if (token.normalized == normalized && text.substr(pos).starts_with(token.content)) {
        match = &token;
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + match->content.size();
    // Like the Aho-Corasick scan in tokenizers, a rejected match is skipped as a whole.
    const bool skip_special = !parse_special && match->special;
    const bool inside_word =
        match->single_word && ((start > 0 && is_word_char(text[start - 1])) ||
                               (stop < text.size() && is_word_char(text[stop])));
    if (skip_special || inside_word) {
      pos = stop;
      continue;
    }
    if (match->lstrip) {
      while (start > emitted && is_space(text[start - 1])) --start;
    }
    if (match->rstrip) {
      while (stop < text.size() && is_space(text[stop])) ++stop;
    }
    if (start > emitted) {
      out.push_back({std::string(text.substr(emitted, start - emitted)), std::nullopt,
                     at_text_start && emitted == 0});
    }
    out.push_back({match->content, match->id, at_text_start && start == 0});
    emitted = stop;
    pos = stop;
  }
  if (emitted < text.size()) {
    out.push_back({std::string(text.substr(emitted)), std::nullopt, at_text_start && emitted == 0});
  }
  return out;
}

const AddedToken* AddedVocabulary::find(std::int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<std::int32_t> AddedVocabulary::find(std::string_view content) const {
  if (content.empty()) return std::nullopt;
  for (std::size_t index : by_first_byte_[static_cast<unsigned char>(content[0])]) {
    if (tokens_[index].content == content) return tokens_[index].id;
  }
  return std::nullopt;
}

}  // namespace pagoda
