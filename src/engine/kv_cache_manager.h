// The paged KV cache seen from requests: block tables, prefix-cache lookups and capacity checks
// on top of a BlockPool. block_size = 4 in this picture:
//
//   request tokens   a b c d | e f g h | i j k l | m n
//   block table      [  9    ,   2     ,   14    ,  5 ]      request.block_ids()
//   block keys       k0=H(root,abcd)  k1=H(k0,efgh)  k2=H(k1,ijkl)   (tail block: no key)
//
// A block gets its key when the step that fills it is scheduled (allocate_slots), so a request
// admitted later in the same step can already hit it. That relies on the executor storing every
// batch token's K/V for a layer before that layer's attention reads the cache, as
// ModelExecutor::forward documents. Keys cover known tokens only: a block that a token still
// in flight completes (overlapped steps) is keyed by the request's next allocate_slots.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/block_pool.h"
#include "engine/cache_config.h"
#include "engine/request.h"

namespace pagoda::engine {

/// The cached prefix a waiting request can start from.
struct ComputedBlocks {
  std::vector<std::int32_t> block_ids;  ///< Leading blocks found in the cache, in order.
  std::int64_t num_tokens = 0;          ///< block_ids.size() * block_size.
};

/// Prefix-cache counters in tokens, counted once per admission (vLLM's queries/hits).
struct PrefixCacheStats {
  std::int64_t queries = 0;  ///< Tokens of admitted requests looked up.
  std::int64_t hits = 0;     ///< Of those, tokens served from the cache.
};

/// Allocates and frees the blocks of requests and keeps the prefix cache.
class KvCacheManager {
 public:
  /// `config` must validate (CHECKed).
  explicit KvCacheManager(const CacheConfig& config);

  /// Tokens per block.
  std::int64_t block_size() const { return block_size_; }
  /// Whether full blocks are keyed and reused.
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  /// Blocks needed to hold `num_tokens` tokens.
  std::int64_t num_blocks_for(std::int64_t num_tokens) const;

  /// Extends request.block_hashes() over every full block of its tokens; call after tokens are
  /// added. No-op with prefix caching off.
  void update_block_hashes(Request& request) const;

  /// The longest cached prefix of a request holding no blocks, in whole blocks and never its
  /// last token (that one must run to produce logits). Pure: takes no references.
  ComputedBlocks get_computed_blocks(const Request& request) const;

  /// Makes room for `num_new_tokens` more tokens (+ `num_lookahead_tokens` speculative slots)
  /// after request.num_computed_tokens(); `computed` are prefix hits from get_computed_blocks for
  /// a request without blocks. All or nothing: nullopt when the pool cannot hold them (never
  /// over-commits). On success returns the blocks appended to the table (hits first), takes the
  /// hits as computed tokens and keys the blocks this step fills.
  std::optional<std::vector<std::int32_t>> allocate_slots(Request& request,
                                                          std::int64_t num_new_tokens,
                                                          const ComputedBlocks& computed = {},
                                                          std::int64_t num_lookahead_tokens = 0);

  /// Returns all of the request's blocks, last block first so that the tail of a prefix is
  /// evicted before its head. The request keeps num_computed_tokens; callers reset it.
  void free(Request& request);

  /// For n > 1 sampling: `child` (same prompt, no blocks) shares `parent`'s computed full blocks
  /// by reference count, up to but excluding its last token. Full blocks are immutable and partial
  /// blocks are never shared, so no copy-on-write is needed. Returns the shared token count.
  std::int64_t fork(const Request& parent, Request& child);

  /// Used fraction of the pool.
  double usage() const { return pool_.usage(); }
  /// Prefix-cache counters since construction.
  const PrefixCacheStats& prefix_cache_stats() const { return prefix_stats_; }
  /// The underlying pool (stats and invariant checks).
  const BlockPool& block_pool() const { return pool_; }
  /// Forgets every key when no block is used (e.g. after a weight reload); false otherwise.
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }

 private:
  void cache_full_blocks(Request& request, std::int64_t num_tokens);

  std::int64_t block_size_;
  bool enable_prefix_caching_;
  std::uint64_t prefix_hash_seed_;
  BlockPool pool_;
  PrefixCacheStats prefix_stats_;
};

}  // namespace pagoda::engine
