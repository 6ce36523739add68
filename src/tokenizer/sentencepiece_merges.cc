#include "tokenizer/sentencepiece_merges.h"

#include <algorithm>
#include <cstdint>

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
  std::int32_t merged_id;
  double score;
  std::uint32_t left_chars;
  std::uint32_t right_chars;
};

}  // namespace

std::vector<MergeIds> sentencepiece_merges(const std::vector<std::string>& tokens,
                                           const std::vector<double>& scores) {
  // A token spelled twice keeps its last id and score, and its first place in the order, as a
  // Python dict built from the list does.
  VocabMap vocab;
  vocab.reserve(tokens.size());
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto [it, inserted] = vocab.try_emplace(tokens[i], static_cast<std::int32_t>(i));
    if (inserted) {
      order.push_back(i);
    } else {
      it->second = static_cast<std::int32_t>(i);
    }
  }
  std::vector<Candidate> candidates;
  std::vector<Candidate> local;
  for (std::size_t index : order) {
    const std::string_view merged = tokens[index];
    if (merged.empty()) continue;
    local.clear();
    const std::int32_t merged_id = vocab.find(merged)->second;
    std::uint32_t left_chars = 0;
    for (std::size_t cut = utf8_char_length(static_cast<unsigned char>(merged[0]));
         cut < merged.size(); cut += utf8_char_length(static_cast<unsigned char>(merged[cut]))) {
      ++left_chars;
      const auto left = vocab.find(merged.substr(0, cut));
      if (left == vocab.end()) continue;
      const auto right = vocab.find(merged.substr(cut));
      if (right == vocab.end()) continue;
      local.push_back({left->second, right->second, merged_id, scores[merged_id], left_chars,
                       static_cast<std::uint32_t>(count_chars(merged.substr(cut)))});
    }
    std::stable_sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return a.left_id != b.left_id ? a.left_id < b.left_id : a.right_id < b.right_id;
    });
    candidates.insert(candidates.end(), local.begin(), local.end());
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.score != b.score) return a.score > b.score;
                     if (a.left_chars != b.left_chars) return a.left_chars > b.left_chars;
                     return a.right_chars > b.right_chars;
                   });
  std::vector<MergeIds> merges;
  merges.reserve(candidates.size());
  for (const Candidate& c : candidates) merges.push_back({c.left_id, c.right_id, c.merged_id});
  return merges;
}

}  // namespace pagoda
