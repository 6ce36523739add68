#include "engine/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per block.
#include <xxhash.h>

namespace pagoda::engine {
namespace {

BlockHash from_xxh(XXH128_hash_t h) {
  return {h.low64, h.high64};
}

}  // namespace

BlockHash root_block_hash(std::uint64_t seed, std::string_view cache_salt) {
  // Distinct from any block key: a block hash always covers at least 16 parent bytes plus
  // tokens, while this covers a tag and the salt.
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, seed);
  static constexpr char kTag[] = "pagoda-prefix-root";
  XXH3_128bits_update(&state, kTag, sizeof(kTag));
  XXH3_128bits_update(&state, cache_salt.data(), cache_salt.size());
  return from_xxh(XXH3_128bits_digest(&state));
}

BlockHash hash_block(const BlockHash& parent, std::span<const std::int32_t> token_ids) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  const std::uint64_t parent_words[2] = {parent.lo, parent.hi};
  XXH3_128bits_update(&state, parent_words, sizeof(parent_words));
  XXH3_128bits_update(&state, token_ids.data(), token_ids.size_bytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace pagoda::engine
