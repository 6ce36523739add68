// The BPE model: a word becomes the ids of its characters (or bytes), then the lowest-ranked
// adjacent pair is merged until no merge applies, as Hugging Face `tokenizers` does. A min-heap of
// candidate pairs keyed by (rank, position) makes one word O(n log n), so a 100 KB word without
// spaces takes milliseconds. Results for short words are cached.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// Hash that lets unordered maps keyed by std::string be probed with a string_view.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

/// Ids at or above this are rejected as corrupt (the largest real vocabularies are ~260K).
inline constexpr std::int32_t kMaxVocabSize = 1 << 24;

/// Token spelling -> id.
using VocabMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

/// One merge given by ids: left + right -> merged.
struct MergeIds {
  std::int32_t left;
  std::int32_t right;
  std::int32_t merged;
};

/// What a BPE model is built from; merges are spelled pairs in rank order, or ids (merge_ids,
/// ranked after any spelled ones) where the loader already resolved them.
struct BpeModelConfig {
  VocabMap vocab;
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<MergeIds> merge_ids;
  /// Words arrive as raw bytes and start as the ids of their GPT-2 alphabet characters.
  bool byte_level = false;
  /// A character missing from the vocabulary becomes its <0xNN> byte tokens.
  bool byte_fallback = false;
  /// A word spelled exactly by one token is that token, merges or not (Llama 3).
  bool ignore_merges = false;
  /// Consecutive unknown characters become one unknown token.
  bool fuse_unk = false;
  /// Unknown characters map here; without one they are dropped, as in tokenizers.
  std::optional<std::string> unk_token;
};

/// An immutable BPE model; encode_word is thread-safe.
class BpeModel {
 public:
  /// Resolves merges against the vocabulary; `source` names the file in error messages.
  static StatusOr<std::unique_ptr<BpeModel>> create(BpeModelConfig config,
                                                    const std::string& source);

  /// Appends the ids of `word` (raw bytes for a byte-level model, else text) to `out`.
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  /// The spelling of `id`, if it is in the vocabulary.
  std::optional<std::string_view> id_to_piece(std::int32_t id) const;
  /// The id spelled `piece`.
  std::optional<std::int32_t> piece_to_id(std::string_view piece) const;
  /// One more than the largest id in the vocabulary.
  std::int32_t size() const { return static_cast<std::int32_t>(pieces_.size()); }
  /// Whether words are raw bytes.
  bool byte_level() const { return byte_level_; }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged_id;
  };
  BpeModel() = default;

  void initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const;
  void merge(std::vector<std::int32_t>& ids) const;
  const Merge* find_merge(std::int32_t left, std::int32_t right) const;

  VocabMap vocab_;
  std::vector<std::string> pieces_;
  std::vector<bool> has_piece_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::int32_t byte_ids_[256];      // Byte-level: the id of each byte's alphabet character.
  std::int32_t fallback_ids_[256];  // Byte fallback: the id of <0xNN>, or -1.
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  std::optional<std::int32_t> unk_id_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>>
      cache_;
};

}  // namespace pagoda
