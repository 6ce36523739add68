// The pool of KV blocks: ids 0..N-1, a reference count each, and the free queue that doubles as
// the prefix cache's LRU list.
//
//   free queue (intrusive, doubly linked through the block array; O(1) removal from the middle):
//
//     head -> [7] <-> [3] <-> [12] <-> [5] <- tail
//             evicted first            freed last
//
//   allocate(): pops from the head; a block that still carries a key loses it then (eviction).
//   free():     a block whose count drops to 0 goes to the TAIL when it carries a key (it may be
//               hit again, newest last), to the HEAD when it does not (nothing worth keeping).
//   touch():    a cache hit on a free block unlinks it from wherever it sits and counts it used.
//
// Invariant: free + used == total, where free means ref_count == 0 (exactly the queued blocks).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"

namespace pagoda::engine {

/// Fixed pool of KV-cache blocks with ref counts, an LRU free queue and the prefix-cache map.
class BlockPool {
 public:
  /// A pool of `num_blocks` free blocks without keys.
  explicit BlockPool(std::int32_t num_blocks);

  /// Total blocks.
  std::int32_t num_blocks() const { return num_blocks_; }
  /// Blocks with ref_count 0 (some may still carry keys: the prefix-cache residue).
  std::int32_t num_free_blocks() const { return num_free_; }
  /// Blocks referenced by at least one request.
  std::int32_t num_used_blocks() const { return num_blocks_ - num_free_; }
  /// Used fraction in [0, 1].
  double usage() const;
  /// Blocks findable by key (used or free).
  std::int64_t num_cached_blocks() const { return static_cast<std::int64_t>(cached_.size()); }

  /// Takes `n` blocks from the head of the free queue with ref_count 1, appending their ids to
  /// `out`; evicts their keys. CHECKs n <= num_free_blocks(): callers check capacity first.
  void allocate(std::int32_t n, std::vector<std::int32_t>& out);
  /// Adds one reference to each block; a free block (a cache hit) leaves the free queue.
  void touch(std::span<const std::int32_t> block_ids);
  /// Drops one reference from each block, in order. CHECKs against double free.
  void free(std::span<const std::int32_t> block_ids);

  /// Makes a full, used block findable under `hash`. When another block already holds the key,
  /// the map keeps that one and this block stays unkeyed; returns whether `block_id` got it.
  bool cache_block(std::int32_t block_id, const BlockHash& hash);
  /// The block holding `hash`, used or free.
  std::optional<std::int32_t> get_cached_block(const BlockHash& hash) const;
  /// Forgets every key; refused (false) while any block is in use, since holders rely on them.
  bool reset_prefix_cache();

  /// References to `block_id`.
  std::int32_t ref_count(std::int32_t block_id) const;
  /// The key `block_id` carries, if any.
  std::optional<BlockHash> block_hash(std::int32_t block_id) const;
  /// Free-queue order, head first (tests and debugging).
  std::vector<std::int32_t> free_queue() const;
  /// Walks every block and CHECKs the invariants above; O(num_blocks).
  void check_invariants() const;

 private:
  struct Block {
    std::int32_t ref_count = 0;
    std::int32_t prev = -1;  // free-queue links; -1 when not queued
    std::int32_t next = -1;
    bool has_hash = false;
    BlockHash hash;
  };

  void check_id(std::int32_t block_id) const;
  void link_after(std::int32_t at, std::int32_t block_id);
  void unlink(std::int32_t block_id);
  void evict_hash(std::int32_t block_id);

  std::int32_t num_blocks_;
  std::int32_t num_free_;
  // blocks_[num_blocks_] is the queue's sentinel: its next is the head, its prev the tail.
  std::vector<Block> blocks_;
  std::unordered_map<BlockHash, std::int32_t, BlockHashHasher> cached_;
};

}  // namespace pagoda::engine
