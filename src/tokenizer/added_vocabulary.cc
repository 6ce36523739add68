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

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer& normalizer)
    : tokens_(std::move(tokens)) {
  patterns_.reserve(tokens_.size());
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    by_id_[token.id] = i;
    if (!token.content.empty()) by_content_.emplace(token.content, token.id);
    has_normalized_ = has_normalized_ || token.normalized;
    patterns_.push_back(token.normalized && !normalizer.empty() ? normalizer.apply(token.content)
                                                                : token.content);
    if (!patterns_[i].empty()) {
      by_first_byte_[static_cast<unsigned char>(patterns_[i][0])].push_back(i);
    }
  }
  for (auto& candidates : by_first_byte_) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
      return patterns_[a].size() > patterns_[b].size();
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
    std::size_t match_length = 0;
    for (std::size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const AddedToken& token = tokens_[index];
      if (token.normalized == normalized && text.substr(pos).starts_with(patterns_[index])) {
        match = &token;
        match_length = patterns_[index].size();
        break;
      }
    }
    if (match == nullptr) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + match_length;
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
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pagoda
