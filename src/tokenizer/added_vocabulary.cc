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
    if (!patterns_[i].empty()) insert(i);
  }
}

void AddedVocabulary::insert(std::size_t index) {
  std::int32_t node = 0;
  for (const char c : patterns_[index]) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = trie_[node].children;
    const auto it = std::find_if(children.begin(), children.end(),
                                 [&](const auto& child) { return child.first == byte; });
    if (it != children.end()) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<std::int32_t>(trie_.size());
    children.emplace_back(byte, next);
    trie_.emplace_back();  // May move trie_, so `children` is not used after this.
    node = next;
  }
  std::int32_t& slot = trie_[node].token_index[tokens_[index].normalized ? 1 : 0];
  if (slot < 0) slot = static_cast<std::int32_t>(index);  // Equal patterns: the first one wins.
}

std::optional<std::pair<std::size_t, std::size_t>> AddedVocabulary::longest_match(
    std::string_view text, std::size_t pos, bool normalized) const {
  std::optional<std::pair<std::size_t, std::size_t>> best;
  std::int32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = trie_[node].children;
    const auto it = std::find_if(children.begin(), children.end(),
                                 [&](const auto& child) { return child.first == byte; });
    if (it == children.end()) break;
    node = it->second;
    const std::int32_t index = trie_[node].token_index[normalized ? 1 : 0];
    if (index >= 0) best.emplace(static_cast<std::size_t>(index), i + 1 - pos);
  }
  return best;
}

std::vector<TextSegment> AddedVocabulary::split(std::string_view text, bool at_text_start,
                                                bool normalized, bool parse_special) const {
  std::vector<TextSegment> out;
  std::size_t emitted = 0;  // Text before this offset is already in `out`.
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto found = longest_match(text, pos, normalized);
    if (!found) {
      ++pos;
      continue;
    }
    const AddedToken* match = &tokens_[found->first];
    std::size_t start = pos;
    std::size_t stop = pos + found->second;
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
