#include "engine/block_pool.h"

#include "common/check.h"

namespace pagoda::engine {

BlockPool::BlockPool(std::int32_t num_blocks)
    : num_blocks_(num_blocks), num_free_(0), blocks_(static_cast<std::size_t>(num_blocks) + 1) {
  PAGODA_CHECK(num_blocks > 0) << "a block pool needs blocks, got " << num_blocks;
  const std::int32_t sentinel = num_blocks_;
  blocks_[sentinel].prev = blocks_[sentinel].next = sentinel;
  for (std::int32_t id = 0; id < num_blocks_; ++id) {
    link_after(blocks_[sentinel].prev, id);
    ++num_free_;
  }
}

double BlockPool::usage() const {
  return static_cast<double>(num_used_blocks()) / static_cast<double>(num_blocks_);
}

void BlockPool::allocate(std::int32_t n, std::vector<std::int32_t>& out) {
  PAGODA_CHECK(n >= 0 && n <= num_free_)
      << "allocating " << n << " blocks with " << num_free_ << " free (over-commit)";
  const std::int32_t sentinel = num_blocks_;
  for (std::int32_t i = 0; i < n; ++i) {
    const std::int32_t id = blocks_[sentinel].next;
    unlink(id);
    --num_free_;
    evict_hash(id);
    blocks_[id].ref_count = 1;
    out.push_back(id);
  }
}

void BlockPool::touch(std::span<const std::int32_t> block_ids) {
  for (const std::int32_t id : block_ids) {
    check_id(id);
    Block& b = blocks_[id];
    if (b.ref_count == 0) {
      unlink(id);
      --num_free_;
    }
    ++b.ref_count;
  }
}

void BlockPool::free(std::span<const std::int32_t> block_ids) {
  const std::int32_t sentinel = num_blocks_;
  for (const std::int32_t id : block_ids) {
    check_id(id);
    Block& b = blocks_[id];
    PAGODA_CHECK(b.ref_count > 0) << "double free of KV block " << id;
    if (--b.ref_count > 0) continue;
    // A keyed block may be hit again: newest at the tail. An unkeyed one is worth nothing, so it
    // is reused first and keyed blocks live longer.
    link_after(b.has_hash ? blocks_[sentinel].prev : sentinel, id);
    ++num_free_;
  }
}

bool BlockPool::cache_block(std::int32_t block_id, const BlockHash& hash) {
  check_id(block_id);
  Block& b = blocks_[block_id];
  PAGODA_CHECK(b.ref_count > 0) << "caching free block " << block_id;
  if (b.has_hash) {
    PAGODA_CHECK(b.hash == hash) << "block " << block_id << " re-keyed with a different hash";
    return true;
  }
  if (!cached_.try_emplace(hash, block_id).second) return false;
  b.has_hash = true;
  b.hash = hash;
  return true;
}

std::optional<std::int32_t> BlockPool::get_cached_block(const BlockHash& hash) const {
  const auto it = cached_.find(hash);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_ != num_blocks_) return false;
  for (std::int32_t id = 0; id < num_blocks_; ++id) blocks_[id].has_hash = false;
  cached_.clear();
  return true;
}

std::int32_t BlockPool::ref_count(std::int32_t block_id) const {
  check_id(block_id);
  return blocks_[block_id].ref_count;
}

std::optional<BlockHash> BlockPool::block_hash(std::int32_t block_id) const {
  check_id(block_id);
  if (!blocks_[block_id].has_hash) return std::nullopt;
  return blocks_[block_id].hash;
}

std::vector<std::int32_t> BlockPool::free_queue() const {
  std::vector<std::int32_t> order;
  const std::int32_t sentinel = num_blocks_;
  for (std::int32_t id = blocks_[sentinel].next; id != sentinel; id = blocks_[id].next) {
    order.push_back(id);
  }
  return order;
}

void BlockPool::check_invariants() const {
  const std::int32_t sentinel = num_blocks_;
  std::int32_t queued = 0;
  std::vector<bool> in_queue(num_blocks_, false);
  for (std::int32_t id = blocks_[sentinel].next; id != sentinel; id = blocks_[id].next) {
    PAGODA_CHECK(id >= 0 && id < num_blocks_) << "free queue holds bad id " << id;
    PAGODA_CHECK(!in_queue[id]) << "block " << id << " queued twice";
    PAGODA_CHECK(blocks_[blocks_[id].next].prev == id) << "broken link after block " << id;
    in_queue[id] = true;
    ++queued;
  }
  PAGODA_CHECK_EQ(queued, num_free_) << "free queue length vs free count";
  std::int64_t keyed = 0;
  for (std::int32_t id = 0; id < num_blocks_; ++id) {
    const Block& b = blocks_[id];
    PAGODA_CHECK(b.ref_count >= 0) << "block " << id << " has ref_count " << b.ref_count;
    PAGODA_CHECK((b.ref_count == 0) == in_queue[id]) << "block " << id << " free/queued mismatch";
    if (b.has_hash) {
      ++keyed;
      const auto it = cached_.find(b.hash);
      PAGODA_CHECK(it != cached_.end() && it->second == id) << "block " << id << " key unmapped";
    }
  }
  PAGODA_CHECK_EQ(keyed, num_cached_blocks()) << "keyed blocks vs prefix-cache map";
  PAGODA_CHECK_EQ(num_free_blocks() + num_used_blocks(), num_blocks_) << "free + used != total";
}

void BlockPool::check_id(std::int32_t block_id) const {
  PAGODA_CHECK(block_id >= 0 && block_id < num_blocks_)
      << "KV block id " << block_id << " outside [0, " << num_blocks_ << ")";
}

void BlockPool::link_after(std::int32_t at, std::int32_t block_id) {
  Block& b = blocks_[block_id];
  const std::int32_t next = blocks_[at].next;
  b.prev = at;
  b.next = next;
  blocks_[at].next = block_id;
  blocks_[next].prev = block_id;
}

void BlockPool::unlink(std::int32_t block_id) {
  Block& b = blocks_[block_id];
  PAGODA_CHECK(b.prev >= 0 && b.next >= 0) << "block " << block_id << " is not in the free queue";
  blocks_[b.prev].next = b.next;
  blocks_[b.next].prev = b.prev;
  b.prev = b.next = -1;
}

void BlockPool::evict_hash(std::int32_t block_id) {
  Block& b = blocks_[block_id];
  if (!b.has_hash) return;
  cached_.erase(b.hash);
  b.has_hash = false;
}

}  // namespace pagoda::engine
