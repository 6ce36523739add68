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
//
// KV groups (vLLM's hybrid KV cache manager; docs/kv_cache_groups.md). A model with
// sliding-window layers has one group for its full layers (group 0, as above) and groups of as
// many sliding layers each (Gemma 3 270M: 3 full layers, 15 sliding ones in groups 1..5), all
// taking blocks from the one pool: a block id is a page in every group's memory, which the
// executor lays out per layer slot (layer k of any group uses slot k). Each group has its own
// table per request. A sliding group's table is indexed like group 0's (entry i: positions
// [i*bs, (i+1)*bs)) but keeps only the blocks its window can still see; the others are freed and
// their entries set to -1. window 6, block_size 4, a request at num_computed_tokens 13
// scheduling 2 tokens:
//
//   positions        0..3 | 4..7 | 8..11 | 12..15      queries 13, 14 see keys 8..14
//   group 0 table    [ 9  ,  2   ,  14   ,  5   ]
//   group 1 table    [ -1 ,  -1  ,  21   ,  3   ]      first kept block (13 - 6 + 1) / 4 = 2
//
// The first kept block follows the first position the step computes (first_window_block), so
// chunked prefill, drafts past the last token (never counted as computed) and tokens in flight
// only ever add blocks at the end, and a rollback after rejected drafts never moves below that
// position. Freed blocks may go to another request at once: steps run in launch order on one
// stream, so the step in flight has read them before a later step writes them.
//
// Prefix caching keys every group's full blocks by the request's chained hashes, each group's
// key made distinct (group_key), since the groups share one pool. A hit of k blocks needs group
// 0's blocks 0..k-1 and, in each sliding group, the blocks the query at position k * bs sees
// (first_window_block(k * bs) .. k-1); get_computed_blocks takes the longest k for which every
// group has them.
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
  /// [num_groups - 1]: sliding group g + 1's blocks for table entries
  /// first_window_block(g + 1, num_tokens) .. block_ids.size() - 1 (empty without a hit).
  std::vector<std::vector<std::int32_t>> window_block_ids;
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
  /// KV groups: 1 + the config's sliding windows.
  std::size_t num_groups() const { return windows_.size(); }
  /// Group `group`'s window (0: full attention).
  std::int64_t sliding_window(std::size_t group) const { return windows_[group]; }
  /// The first table entry of group `group` that a query at `position` reads: 0 for a full
  /// group, (position - window + 1) / block_size (at least 0) for a sliding one.
  std::int64_t first_window_block(std::size_t group, std::int64_t position) const;
  /// Blocks `request` holds in group `group` (its table's entries that are not -1).
  std::int64_t num_held_blocks(const Request& request, std::size_t group) const;

  /// Extends request.block_hashes() over every full block of its tokens; call after tokens are
  /// added. No-op with prefix caching off.
  void update_block_hashes(Request& request) const;

  /// The longest cached prefix of a request holding no blocks, in whole blocks and never its
  /// last token (that one must run to produce logits). Pure: takes no references.
  ComputedBlocks get_computed_blocks(const Request& request) const;

  /// Makes room for `num_new_tokens` more tokens (+ `num_lookahead_tokens` speculative slots)
  /// after request.num_computed_tokens(); `computed` are prefix hits from get_computed_blocks for
  /// a request without blocks. All or nothing: nullopt when a pool cannot hold them (never
  /// over-commits). On success returns the blocks appended to group 0's table (hits first; the
  /// other groups' tables grow in step, request.block_ids(g)), takes the hits as computed tokens
  /// and keys the blocks this step fills. First, either way, sliding groups free the blocks
  /// that no query from num_computed_tokens on can see.
  std::optional<std::vector<std::int32_t>> allocate_slots(Request& request,
                                                          std::int64_t num_new_tokens,
                                                          const ComputedBlocks& computed = {},
                                                          std::int64_t num_lookahead_tokens = 0);

  /// Returns all of the request's blocks, last block first so that the tail of a prefix is
  /// evicted before its head. The request keeps num_computed_tokens; callers reset it.
  void free(Request& request);

  /// For n > 1 sampling: `child` (same prompt, no blocks) shares `parent`'s computed full blocks
  /// by reference count, up to but excluding its last token. Full blocks are immutable and partial
  /// blocks are never shared, so no copy-on-write is needed. Returns the shared token count;
  /// 0 when a sliding group of the parent no longer holds the window the child would need.
  std::int64_t fork(const Request& parent, Request& child);

  /// Used fraction of the pool.
  double usage() const { return pool_.usage(); }
  /// Prefix-cache counters since construction.
  const PrefixCacheStats& prefix_cache_stats() const { return prefix_stats_; }
  /// The underlying pool, shared by every group (stats and invariant checks).
  const BlockPool& block_pool() const { return pool_; }
  /// Forgets every key when no block is used (e.g. after a weight reload); false otherwise.
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }

  /// Group `group`'s prefix-cache key of a block keyed `hash`: the hash itself in group 0, a
  /// hash of it and the group in the others, so the groups' blocks never answer for each other.
  static BlockHash group_key(const BlockHash& hash, std::size_t group);

 private:
  void cache_full_blocks(Request& request, std::int64_t num_tokens);
  // Frees group `group`'s blocks below first_window_block(group, position).
  void free_outside_window(Request& request, std::size_t group, std::int64_t position);
  // Whether every sliding group has the cached blocks a hit of `num_blocks` blocks needs; else
  // the largest hit length that may still work (below the first missing block).
  std::int64_t longest_window_hit(const Request& request, std::int64_t num_blocks) const;

  std::int64_t block_size_;
  bool enable_prefix_caching_;
  std::uint64_t prefix_hash_seed_;
  BlockPool pool_;
  std::vector<std::int64_t> windows_;  // per group; [0] = 0, the full layers (or all layers)
  PrefixCacheStats prefix_stats_;
  std::vector<std::int64_t> num_new_blocks_;  // allocate_slots' scratch, per group
};

}  // namespace pagoda::engine
