#include "tokenizer/sentencepiece_merges.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/bpe_model.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

std::size_t count_chars(std::string_view s) {
  std::size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

struct Candidate {
  std::int32_t left_id;
  std::int32_t right_id;
  double score;
  std::size_t left_chars;
  std::size_t right_chars;
  std::string left;
  std::string right;
};

}  // namespace

std::vector<std::pair<std::string, std::string>> sentencepiece_merges(
    const std::vector<std::string>& tokens, const std::vector<double>& scores) {
  // A token spelled twice keeps its last id, as a Python dict built from the list does.
  VocabMap vocab;
  for (std::size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<std::int32_t>(i);
  std::unordered_map<std::string_view, double> score_of;
  std::vector<std::string_view> order;  // Dict order: first occurrence of each spelling.
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (score_of.emplace(tokens[i], scores[i]).second) {
      order.push_back(tokens[i]);
    } else {
      score_of[tokens[i]] = scores[i];
    }
  }
  std::vector<Candidate> candidates;
  for (std::string_view merged : order) {
    if (merged.empty()) continue;
    std::vector<Candidate> local;
    for (std::size_t cut = utf8_char_length(static_cast<unsigned char>(merged[0]));
         cut < merged.size(); cut += utf8_char_length(static_cast<unsigned char>(merged[cut]))) {
      const auto left = vocab.find(merged.substr(0, cut));
      const auto right = vocab.find(merged.substr(cut));
      if (left == vocab.end() || right == vocab.end()) continue;
      local.push_back({left->second, right->second, score_of[merged], count_chars(left->first),
                       count_chars(right->first), left->first, right->first});
    }
    std::stable_sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left_id != b.left_id ? a.left_id < b.left_id : a.right_id < b.right_id;
    });
    for (Candidate& c : local) candidates.push_back(std::move(c));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.score != b.score) return a.score > b.score;
                     if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
                     return a.right_chars > b.right_chars;
                   });
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(candidates.size());
  for (Candidate& c : candidates) merges.emplace_back(std::move(c.left), std::move(c.right));
  return merges;
}

}  // namespace pagoda
