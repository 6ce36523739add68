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
      pool_(static_cast<std::int32_t>(config.num_blocks)) {}

std::int64_t KvCacheManager::num_blocks_for(std::int64_t num_tokens) const {
  return (num_tokens + block_size_ - 1) / block_size_;
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
  computed.num_tokens = static_cast<std::int64_t>(computed.block_ids.size()) * block_size_;
  return computed;
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

  const std::int64_t num_required =
      num_blocks_for(num_computed + num_new_tokens + num_lookahead_tokens);
  const auto num_held =
      static_cast<std::int64_t>(request.block_ids().size() + computed.block_ids.size());
  const std::int64_t num_new_blocks = std::max<std::int64_t>(0, num_required - num_held);
  // A hit on a free block takes it out of the free queue, so it costs capacity like a new block.
  const auto num_free_hits =
      std::count_if(computed.block_ids.begin(), computed.block_ids.end(),
                    [this](std::int32_t id) { return pool_.ref_count(id) == 0; });
  if (num_new_blocks + num_free_hits > pool_.num_free_blocks()) return std::nullopt;

  std::vector<std::int32_t>& table = request.mutable_block_ids();
  const std::size_t old_size = table.size();
  if (fresh && enable_prefix_caching_) {
    prefix_stats_.queries += request.num_tokens();
    prefix_stats_.hits += computed.num_tokens;
  }
  if (!computed.block_ids.empty()) {
    pool_.touch(computed.block_ids);
    table.insert(table.end(), computed.block_ids.begin(), computed.block_ids.end());
    request.set_num_computed_tokens(computed.num_tokens);
    request.set_num_cached_blocks(static_cast<std::int64_t>(computed.block_ids.size()));
  }
  pool_.allocate(static_cast<std::int32_t>(num_new_blocks), table);
  cache_full_blocks(request, num_computed + num_new_tokens);
  return std::vector<std::int32_t>(table.begin() + static_cast<std::ptrdiff_t>(old_size),
                                   table.end());
}

void KvCacheManager::free(Request& request) {
  std::vector<std::int32_t>& table = request.mutable_block_ids();
  for (auto it = table.rbegin(); it != table.rend(); ++it) pool_.free(std::span(&*it, 1));
  table.clear();
  request.set_num_cached_blocks(0);
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
  const auto p = parent.token_ids().first(num_tokens);
  const auto c = child.token_ids().first(num_tokens);
  PAGODA_CHECK(std::equal(p.begin(), p.end(), c.begin()))
      << child.request_id() << " forked from " << parent.request_id() << " with another prefix";
  const std::span<const std::int32_t> shared(parent.block_ids().data(), num_shared);
  pool_.touch(shared);
  child.mutable_block_ids().assign(shared.begin(), shared.end());
  child.set_num_computed_tokens(num_tokens);
  child.set_num_cached_blocks(std::min(num_shared, parent.num_cached_blocks()));
  return num_tokens;
}

void KvCacheManager::cache_full_blocks(Request& request, std::int64_t num_tokens) {
  if (!enable_prefix_caching_) return;
  const std::vector<BlockHash>& hashes = request.block_hashes();
  PAGODA_CHECK(static_cast<std::int64_t>(hashes.size()) >= request.num_tokens() / block_size_)
      << request.request_id() << ": block hashes not updated";
  // Only known tokens have keys: a block a token in flight fills is keyed by a later step.
  const std::int64_t num_full = std::min(num_tokens, request.num_tokens()) / block_size_;
  const std::vector<std::int32_t>& table = request.block_ids();
  for (std::int64_t i = request.num_cached_blocks(); i < num_full; ++i) {
    pool_.cache_block(table[i], hashes[i]);
  }
  request.set_num_cached_blocks(std::max(request.num_cached_blocks(), num_full));
}

}  // namespace pagoda::engine
