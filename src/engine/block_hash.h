// Prefix-cache keys. A FULL block's key chains its parent's key, so equal keys mean equal whole
// prefixes, not just equal blocks:
//
//   root = H(seed, cache_salt)            per-request extra keys enter the chain once, here
//   k0   = H(root, tokens[0..16))
//   k1   = H(k0,   tokens[16..32))         block_size = 16
//   k2   = H(k1,   tokens[32..48))         a partial tail block has no key until it fills
//
// H is XXH3-128 over the bytes [parent.lo, parent.hi (8 bytes each), token ids as int32], in host
// byte order: keys never leave the process, so no portable encoding is needed.
//
// Collisions: with 128-bit keys, the chance that any two distinct prefixes among n cached blocks
// collide is about n^2 / 2^129 (1e-26 for a million blocks), far below hardware error rates, so a
// hit is trusted without comparing token ids. XXH3 is not cryptographic: someone who can choose
// prompts could in principle craft a collision; vLLM offers sha256 for that threat. Here tenants
// that must not share cache entries get distinct cache_salts, and a deployment can pick a secret
// `prefix_hash_seed` (CacheConfig) so keys cannot be predicted offline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace pagoda::engine {

/// A 128-bit prefix-cache key.
struct BlockHash {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

/// Lets BlockHash key std::unordered_map; the key is already uniform, so its low half suffices.
struct BlockHashHasher {
  std::size_t operator()(const BlockHash& h) const { return static_cast<std::size_t>(h.lo); }
};

/// The parent key of a request's first block: folds in the seed and the request's cache salt.
BlockHash root_block_hash(std::uint64_t seed, std::string_view cache_salt);

/// The key of a full block whose tokens are `token_ids`, following the block keyed `parent`.
BlockHash hash_block(const BlockHash& parent, std::span<const std::int32_t> token_ids);

}  // namespace pagoda::engine
