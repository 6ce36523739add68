// KV block pool costs on the host: allocating and freeing blocks, prefix-cache lookups and hits,
// and the chained block keys. These run inside every engine step (new blocks for decode, keys for
// filled blocks), so they must stay far below a decode step (~ms).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_pool.h"

namespace pagoda::engine {
namespace {

constexpr std::int32_t kPoolBlocks = 65536;

// allocate(n) then free() of the same n blocks, no keys: the decode-step path. Arg: n.
void BM_BlockPoolAllocateFree(benchmark::State& state) {
  BlockPool pool(kPoolBlocks);
  const auto n = static_cast<std::int32_t>(state.range(0));
  std::vector<std::int32_t> ids;
  ids.reserve(n);
  for (auto _ : state) {
    ids.clear();
    pool.allocate(n, ids);
    pool.free(ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_BlockPoolAllocateFree)->Arg(1)->Arg(16)->Arg(256);

// allocate(n) of blocks that carry keys (each allocation evicts a prefix-cache entry), key them
// again, free them to the LRU tail: the churn of a full prefix cache. Arg: n.
void BM_BlockPoolAllocateEvictCache(benchmark::State& state) {
  BlockPool pool(kPoolBlocks);
  const auto n = static_cast<std::int32_t>(state.range(0));
  std::vector<std::int32_t> ids;
  BlockHash key = root_block_hash(0, "");
  const std::vector<std::int32_t> tokens(16, 7);
  // Fill the whole pool with keyed free blocks first.
  ids.reserve(kPoolBlocks);
  pool.allocate(kPoolBlocks, ids);
  for (std::int32_t id : ids) {
    key = hash_block(key, tokens);
    pool.cache_block(id, key);
  }
  pool.free(ids);
  for (auto _ : state) {
    ids.clear();
    pool.allocate(n, ids);
    for (std::int32_t id : ids) {
      key = hash_block(key, tokens);
      pool.cache_block(id, key);
    }
    pool.free(ids);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_BlockPoolAllocateEvictCache)->Arg(16)->Arg(256);

// Prefix-cache hit path: find 128 cached free blocks by key and take a reference (touch), then
// release them: what admitting a request with a 2048-token cached prefix does in the pool.
void BM_BlockPoolLookupTouch128(benchmark::State& state) {
  constexpr std::int32_t kBlocks = 128;
  BlockPool pool(kPoolBlocks);
  std::vector<std::int32_t> ids;
  std::vector<BlockHash> keys;
  BlockHash key = root_block_hash(0, "");
  const std::vector<std::int32_t> tokens(16, 3);
  pool.allocate(kBlocks, ids);
  for (std::int32_t id : ids) {
    key = hash_block(key, tokens);
    keys.push_back(key);
    pool.cache_block(id, key);
  }
  pool.free(ids);
  for (auto _ : state) {
    ids.clear();
    for (const BlockHash& k : keys) ids.push_back(*pool.get_cached_block(k));
    pool.touch(ids);
    pool.free(ids);
  }
  state.SetItemsProcessed(state.iterations() * kBlocks);
}
BENCHMARK(BM_BlockPoolLookupTouch128);

// Chained keys over a whole prompt (block_size 16), reported in tokens/s. Arg: prompt tokens.
void BM_HashPrompt(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::int32_t> prompt(n);
  for (std::size_t i = 0; i < n; ++i) prompt[i] = static_cast<std::int32_t>((i * 131) % 49152);
  const std::span<const std::int32_t> all(prompt);
  for (auto _ : state) {
    BlockHash key = root_block_hash(0, "salt");
    for (std::size_t at = 0; at + 16 <= n; at += 16) key = hash_block(key, all.subspan(at, 16));
    benchmark::DoNotOptimize(key);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(n));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(n * sizeof(std::int32_t)));
}
BENCHMARK(BM_HashPrompt)->Arg(512)->Arg(8192);

}  // namespace
}  // namespace pagoda::engine
