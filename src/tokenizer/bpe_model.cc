#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

constexpr std::size_t kMaxCachedWordBytes = 64;
constexpr std::size_t kMaxCacheEntries = 1 << 16;

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

StatusOr<std::unique_ptr<BpeModel>> BpeModel::create(BpeModelConfig config,
                                                     const std::string& source) {
  std::unique_ptr<BpeModel> model(new BpeModel());
  model->byte_level_ = config.byte_level;
  model->byte_fallback_ = config.byte_fallback;
  model->ignore_merges_ = config.ignore_merges;
  model->fuse_unk_ = config.fuse_unk;
  std::int32_t max_id = -1;
  for (const auto& [piece, id] : config.vocab) {
    if (id < 0) {
      return invalid_argument(source + ": token \"" + piece + "\" has negative id " +
                              std::to_string(id) + "; ids must be 0 or more");
    }
    max_id = std::max(max_id, id);
  }
  if (max_id >= kMaxVocabSize) {
    return invalid_argument(source + ": token id " + std::to_string(max_id) +
                            " is implausibly large; ids must be below " +
                            std::to_string(kMaxVocabSize));
  }
  model->pieces_.resize(static_cast<std::size_t>(max_id + 1));
  model->has_piece_.resize(static_cast<std::size_t>(max_id + 1));
  for (const auto& [piece, id] : config.vocab) {
    model->pieces_[id] = piece;
    model->has_piece_[id] = true;
  }
  model->vocab_ = std::move(config.vocab);

  const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::get();
  for (int b = 0; b < 256; ++b) {
    const auto byte_id = model->piece_to_id(alphabet.spell(static_cast<unsigned char>(b)));
    model->byte_ids_[b] = byte_id.value_or(-1);
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    model->fallback_ids_[b] = model->piece_to_id(name).value_or(-1);
  }
  if (config.unk_token) {
    model->unk_id_ = model->piece_to_id(*config.unk_token);
    if (!model->unk_id_) {
      return invalid_argument(source + ": the unknown token \"" + *config.unk_token +
                              "\" is not in the vocabulary; add it to model.vocab or remove "
                              "model.unk_token");
    }
  }

  model->merges_.reserve(config.merges.size() + config.merge_ids.size());
  for (std::size_t rank = 0; rank < config.merges.size(); ++rank) {
    const auto& [left, right] = config.merges[rank];
    const auto left_id = model->piece_to_id(left);
    const auto right_id = model->piece_to_id(right);
    const auto merged_id = model->piece_to_id(left + right);
    if (!left_id || !right_id || !merged_id) {
      const std::string& missing = !left_id ? left : !right_id ? right : left + right;
      return invalid_argument(source + ": merge #" + std::to_string(rank) + " \"" + left + " " +
                              right + "\" uses \"" + missing +
                              "\", which is not in the vocabulary; the merges do not belong to "
                              "this vocabulary");
    }
    // A repeated pair keeps its last rank, as tokenizers' map collection does.
    model->merges_.insert_or_assign(pair_key(*left_id, *right_id),
                                    Merge{static_cast<std::int32_t>(rank), *merged_id});
  }
  for (std::size_t i = 0; i < config.merge_ids.size(); ++i) {
    const MergeIds& m = config.merge_ids[i];
    for (const std::int32_t id : {m.left, m.right, m.merged}) {
      if (id < 0 || id > max_id || !model->has_piece_[id]) {
        return invalid_argument(source + ": merge #" + std::to_string(i) + " uses id " +
                                std::to_string(id) + ", which is not in the vocabulary");
      }
    }
    const auto rank = static_cast<std::int32_t>(config.merges.size() + i);
    model->merges_.insert_or_assign(pair_key(m.left, m.right), Merge{rank, m.merged});
  }
  return model;
}

std::optional<std::string_view> BpeModel::id_to_piece(std::int32_t id) const {
  if (id < 0 || id >= size() || !has_piece_[id]) return std::nullopt;
  return pieces_[id];
}

std::optional<std::int32_t> BpeModel::piece_to_id(std::string_view piece) const {
  const auto it = vocab_.find(piece);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::find_merge(std::int32_t left, std::int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const {
  bool previous_unknown = false;
  auto add_unknown = [&] {
    if (unk_id_ && !(fuse_unk_ && previous_unknown)) ids.push_back(*unk_id_);
    previous_unknown = true;
  };
  if (byte_level_) {
    for (char c : word) {
      const std::int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id < 0) {
        add_unknown();
      } else {
        ids.push_back(id);
        previous_unknown = false;
      }
    }
    return;
  }
  std::size_t pos = 0;
  while (pos < word.size()) {
    const std::size_t len =
        std::min(utf8_char_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    if (const auto id = piece_to_id(ch)) {
      ids.push_back(*id);
      previous_unknown = false;
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (char c : ch) all_bytes = all_bytes && fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes) {
        for (char c : ch) ids.push_back(fallback_ids_[static_cast<unsigned char>(c)]);
        previous_unknown = false;
        continue;
      }
    }
    add_unknown();
  }
}

// Symbols form a linked list over the initial positions; a merged symbol keeps the left position,
// so (rank, position) orders candidates exactly as tokenizers does: lowest rank, then leftmost.
void BpeModel::merge(std::vector<std::int32_t>& ids) const {
  const auto n = static_cast<std::int32_t>(ids.size());
  if (n < 2) return;
  struct Candidate {
    std::int32_t rank;
    std::int32_t pos;
    std::int32_t left_id;
    std::int32_t right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<std::int32_t> next(n);
  std::vector<std::int32_t> prev(n);
  for (std::int32_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? i + 1 : -1;
    prev[i] = i - 1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](std::int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const Merge* m = find_merge(ids[pos], ids[next[pos]])) {
      heap.push({m->rank, pos, ids[pos], ids[next[pos]]});
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const std::int32_t right = next[c.pos];
    // Entries go stale when a neighbour merged since; the ids no longer match then.
    if (ids[c.pos] != c.left_id || right < 0 || ids[right] != c.right_id) continue;
    ids[c.pos] = find_merge(c.left_id, c.right_id)->merged_id;
    ids[right] = -1;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  std::size_t kept = 0;
  for (std::int32_t i = 0; i >= 0; i = next[i]) ids[kept++] = ids[i];
  ids.resize(kept);
}

void BpeModel::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  if (ignore_merges_) {
    std::string spelled;
    if (byte_level_) ByteLevelAlphabet::get().spell_all(word, spelled);
    if (const auto id = piece_to_id(byte_level_ ? std::string_view(spelled) : word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> ids;
  ids.reserve(word.size());
  initial_symbols(word, ids);
  merge(ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace pagoda
