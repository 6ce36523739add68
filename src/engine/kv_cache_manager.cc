#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <span>

#include "common/check.h"

namespace pagoda::engine {
namespace {

const CacheConfig& validated(const CacheConfig& config) {
  const Status status = config.validate();
  PAGODA_CHECK(status.ok()) << status.to_string();
  return config;
}

}  // namespace

KvCacheManager::KvCacheManager(const CacheConfig& config)
    : block_size_(validated(config).block_size),
      enable_prefix_caching_(config.enable_prefix_caching),
      prefix_hash_seed_(config.prefix_hash_seed),
      pool_(static_cast<std::int32_t>(config.num_blocks)) {
  windows_.push_back(0);
  windows_.insert(windows_.end(), config.sliding_windows.begin(), config.sliding_windows.end());
}

std::int64_t KvCacheManager::num_blocks_for(std::int64_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
}

std::int64_t KvCacheManager::first_window_block(std::size_t group, std::int64_t position) const {
  const std::int64_t window = windows_[group];
  if (window == 0) return 0;
  return std::max<std::int64_t>(0, position - window + 1) / block_size_;
}

std::int64_t KvCacheManager::num_held_blocks(const Request& request, std::size_t group) const {
  const std::vector<std::int32_t>& table = request.block_ids(group);
  return std::count_if(table.begin(), table.end(), [](std::int32_t id) { return id >= 0; });
}

BlockHash KvCacheManager::group_key(const BlockHash& hash, std::size_t group) {
  if (group == 0) return hash;
  // Token ids are never negative, so this "block" of the one id -group is no real block's.
  const std::int32_t tag = -static_cast<std::int32_t>(group);
  return hash_block(hash, std::span(&tag, 1));
}

void KvCacheManager::update_block_hashes(Request& request) const {
  if (!enable_prefix_caching_) return;
  std::vector<BlockHash>& hashes = request.mutable_block_hashes();
  const std::span<const std::int32_t> tokens = request.token_ids();
  const auto num_full = static_cast<std::size_t>(request.num_tokens() / block_size_);
  if (hashes.size() >= num_full) return;
  BlockHash parent = hashes.empty()
                         ? root_block_hash(prefix_hash_seed_, request.options().cache_salt)
                         : hashes.back();
  const auto bs = static_cast<std::size_t>(block_size_);
  for (std::size_t i = hashes.size(); i < num_full; ++i) {
    parent = hash_block(parent, tokens.subspan(i * bs, bs));
    hashes.push_back(parent);
  }
}

std::int64_t KvCacheManager::longest_window_hit(const Request& request,
                                                std::int64_t num_blocks) const {
  const std::vector<BlockHash>& hashes = request.block_hashes();
  for (std::size_t g = 1; g < windows_.size(); ++g) {
    // The query at position num_blocks * bs reads blocks first .. num_blocks - 1; a missing
    // block i rules out every hit longer than i blocks.
    const std::int64_t first = first_window_block(g, num_blocks * block_size_);
    for (std::int64_t i = num_blocks - 1; i >= first; --i) {
      if (!pool_.get_cached_block(group_key(hashes[static_cast<std::size_t>(i)], g))) return i;
    }
  }
  return num_blocks;
}

ComputedBlocks KvCacheManager::get_computed_blocks(const Request& request) const {
  ComputedBlocks computed;
  if (!enable_prefix_caching_ || !request.block_ids().empty() ||
      request.options().skip_prefix_cache_hits) {
    return computed;
  }
  // Stop one token short of the whole sequence: the last token must run to give logits.
  const std::int64_t max_blocks = (request.num_tokens() - 1) / block_size_;
  const std::vector<BlockHash>& hashes = request.block_hashes();
  PAGODA_CHECK(static_cast<std::int64_t>(hashes.size()) >= max_blocks)
      << request.request_id() << ": block hashes not updated";
  for (std::int64_t i = 0; i < max_blocks; ++i) {
    const std::optional<std::int32_t> block = pool_.get_cached_block(hashes[i]);
    if (!block) break;
    computed.block_ids.push_back(*block);
  }
  if (windows_.size() > 1) {
    auto num_blocks = static_cast<std::int64_t>(computed.block_ids.size());
    for (std::int64_t shorter;
         num_blocks > 0 && (shorter = longest_window_hit(request, num_blocks)) != num_blocks;) {
      num_blocks = shorter;
    }
    computed.block_ids.resize(static_cast<std::size_t>(num_blocks));
    computed.window_block_ids.resize(windows_.size() - 1);
    for (std::size_t g = 1; g < windows_.size() && num_blocks > 0; ++g) {
      for (std::int64_t i = first_window_block(g, num_blocks * block_size_); i < num_blocks; ++i) {
        computed.window_block_ids[g - 1].push_back(
            *pool_.get_cached_block(group_key(hashes[static_cast<std::size_t>(i)], g)));
      }
    }
  }
  computed.num_tokens = static_cast<std::int64_t>(computed.block_ids.size()) * block_size_;
  return computed;
}

void KvCacheManager::free_outside_window(Request& request, std::size_t group,
                                         std::int64_t position) {
  std::vector<std::int32_t>& table = request.mutable_block_ids(group);
  const auto end = static_cast<std::size_t>(
      std::min<std::int64_t>(first_window_block(group, position), std::ssize(table)));
  // Held entries are contiguous up to the table's end: walk back from the window's first block
  // to the first entry already freed, then free oldest first (evicted first when keyed).
  std::size_t begin = end;
  while (begin > 0 && table[begin - 1] >= 0) --begin;
  for (std::size_t i = begin; i < end; ++i) {
    pool_.free(std::span(&table[i], 1));
    table[i] = -1;
  }
}

std::optional<std::vector<std::int32_t>> KvCacheManager::allocate_slots(
    Request& request, std::int64_t num_new_tokens, const ComputedBlocks& computed,
    std::int64_t num_lookahead_tokens) {
  PAGODA_CHECK(num_new_tokens >= 0 && num_lookahead_tokens >= 0)
      << request.request_id() << ": negative token count";
  const bool fresh = request.block_ids().empty() && request.num_computed_tokens() == 0;
  PAGODA_CHECK(computed.block_ids.empty() || fresh)
      << request.request_id() << ": prefix hits for a request that already holds blocks";
  const std::int64_t num_computed = request.num_computed_tokens() + computed.num_tokens;
  PAGODA_CHECK_LE(num_computed + num_new_tokens,
                  request.num_tokens() + request.num_samples_in_flight());
  const auto num_hits = static_cast<std::int64_t>(computed.block_ids.size());
  const std::int64_t num_required =
      num_blocks_for(num_computed + num_new_tokens + num_lookahead_tokens);
  for (std::size_t g = 1; g < windows_.size(); ++g) {
    free_outside_window(request, g, num_computed);
  }

  // Per group: the hits it takes and the new blocks it needs, all from the one pool. A hit on
  // a free block takes it out of the free queue, so it costs capacity like a new block.
  const auto hits_of = [&](std::size_t g) -> std::span<const std::int32_t> {
    if (g == 0) return computed.block_ids;
    if (num_hits == 0) return {};
    PAGODA_CHECK_LT(g - 1, computed.window_block_ids.size()) << "hits without their windows";
    return computed.window_block_ids[g - 1];
  };
  std::vector<std::int64_t>& num_new_blocks = num_new_blocks_;  // kept: no allocation per call
  num_new_blocks.resize(windows_.size());
  std::int64_t num_needed = 0;
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    const std::int64_t num_entries =
        num_hits > 0 ? num_hits : static_cast<std::int64_t>(request.block_ids(g).size());
    num_new_blocks[g] = std::max<std::int64_t>(0, num_required - num_entries);
    const std::span<const std::int32_t> hits = hits_of(g);
    num_needed += num_new_blocks[g] + std::count_if(hits.begin(), hits.end(), [this](auto id) {
                    return pool_.ref_count(id) == 0;
                  });
  }
  if (num_needed > pool_.num_free_blocks()) return std::nullopt;

  if (fresh && enable_prefix_caching_) {
    prefix_stats_.queries += request.num_tokens();
    prefix_stats_.hits += computed.num_tokens;
  }
  const std::size_t old_size = request.block_ids().size();
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    std::vector<std::int32_t>& table = request.mutable_block_ids(g);
    const std::span<const std::int32_t> hits = hits_of(g);
    if (num_hits > 0) {
      // A sliding group holds only the hit's window; the entries before it stay -1.
      table.assign(static_cast<std::size_t>(num_hits) - hits.size(), -1);
      pool_.touch(hits);
      table.insert(table.end(), hits.begin(), hits.end());
      request.set_num_cached_blocks(num_hits, g);
    }
    pool_.allocate(static_cast<std::int32_t>(num_new_blocks[g]), table);
  }
  if (num_hits > 0) request.set_num_computed_tokens(computed.num_tokens);
  cache_full_blocks(request, num_computed + num_new_tokens);
  const std::vector<std::int32_t>& table = request.block_ids();
  return std::vector<std::int32_t>(table.begin() + static_cast<std::ptrdiff_t>(old_size),
                                   table.end());
}

void KvCacheManager::free(Request& request) {
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    std::vector<std::int32_t>& table = request.mutable_block_ids(g);
    for (auto it = table.rbegin(); it != table.rend(); ++it) {
      if (*it >= 0) pool_.free(std::span(&*it, 1));
    }
    table.clear();
    request.set_num_cached_blocks(0, g);
  }
}

std::int64_t KvCacheManager::fork(const Request& parent, Request& child) {
  PAGODA_CHECK(child.block_ids().empty() && child.num_computed_tokens() == 0)
      << child.request_id() << ": fork target already holds blocks";
  // Shared blocks keep the parent's keys, which fold in its salt.
  PAGODA_CHECK(child.options().cache_salt == parent.options().cache_salt)
      << child.request_id() << " forked from " << parent.request_id() << " with another salt";
  const std::int64_t num_shared =
      std::min({parent.num_computed_tokens() / block_size_, (child.num_tokens() - 1) / block_size_,
                static_cast<std::int64_t>(parent.block_ids().size())});
  if (num_shared <= 0) return 0;
  const std::int64_t num_tokens = num_shared * block_size_;
  for (std::size_t g = 1; g < windows_.size(); ++g) {
    const std::vector<std::int32_t>& table = parent.block_ids(g);
    for (std::int64_t i = first_window_block(g, num_tokens); i < num_shared; ++i) {
      if (table[static_cast<std::size_t>(i)] < 0) return 0;  // the window is gone
    }
  }
  const auto p = parent.token_ids().first(num_tokens);
  const auto c = child.token_ids().first(num_tokens);
  PAGODA_CHECK(std::equal(p.begin(), p.end(), c.begin()))
      << child.request_id() << " forked from " << parent.request_id() << " with another prefix";
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    const std::int64_t first = first_window_block(g, num_tokens);
    const std::span<const std::int32_t> shared(parent.block_ids(g).data() + first,
                                               static_cast<std::size_t>(num_shared - first));
    pool_.touch(shared);
    std::vector<std::int32_t>& table = child.mutable_block_ids(g);
    table.assign(static_cast<std::size_t>(first), -1);
    table.insert(table.end(), shared.begin(), shared.end());
    child.set_num_cached_blocks(std::min(num_shared, parent.num_cached_blocks(g)), g);
  }
  child.set_num_computed_tokens(num_tokens);
  return num_tokens;
}

void KvCacheManager::cache_full_blocks(Request& request, std::int64_t num_tokens) {
  if (!enable_prefix_caching_) return;
  const std::vector<BlockHash>& hashes = request.block_hashes();
  PAGODA_CHECK(static_cast<std::int64_t>(hashes.size()) >= request.num_tokens() / block_size_)
      << request.request_id() << ": block hashes not updated";
  // Only known tokens have keys: a block a token in flight fills is keyed by a later step.
  const std::int64_t num_full = std::min(num_tokens, request.num_tokens()) / block_size_;
  for (std::size_t g = 0; g < windows_.size(); ++g) {
    const std::vector<std::int32_t>& table = request.block_ids(g);
    for (std::int64_t i = request.num_cached_blocks(g); i < num_full; ++i) {
      // A sliding group's entry is -1 once the window has passed it (or before a hit's window).
      if (table[i] >= 0) pool_.cache_block(table[i], group_key(hashes[i], g));
    }
    request.set_num_cached_blocks(std::max(request.num_cached_blocks(g), num_full), g);
  }
}

}  // namespace pagoda::engine
