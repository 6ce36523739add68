// A compiler over the byte tokenizer of the engine tests (id b is byte b, EOS 256), and a way to
// walk a text through a matcher token by token, checking each byte against the mask first.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string_view>
#include <vector>

#include "../engine/byte_tokenizer_for_test.h"
#include "structured/constraint_compiler.h"
#include "structured/constraint_matcher.h"

namespace pagoda::structured::testing {

using engine::kEos;

inline constexpr std::int64_t kVocab = 259;

inline std::shared_ptr<const Tokenizer> byte_tokenizer() {
  static const std::shared_ptr<const Tokenizer> tokenizer = engine::make_byte_tokenizer();
  return tokenizer;
}

inline std::unique_ptr<ConstraintCompiler> byte_compiler(ConstraintLimits limits = {}) {
  return std::make_unique<ConstraintCompiler>(*byte_tokenizer(), kVocab,
                                              std::vector<std::int32_t>{kEos}, limits);
}

inline bool allowed(std::span<const std::uint32_t> mask, std::int32_t token) {
  return (mask[static_cast<std::size_t>(token) / 32] >> (token % 32)) & 1u;
}

/// Feeds `text` byte by byte; false at the first byte the mask forbids (which is not fed).
inline bool walk(ConstraintMatcher& matcher, std::string_view text) {
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  for (const char c : text) {
    const auto token = static_cast<std::int32_t>(static_cast<unsigned char>(c));
    if (!matcher.fill_next_token_mask(mask) || !allowed(mask, token)) return false;
    EXPECT_TRUE(matcher.accept_token(token)) << "the mask allowed byte " << token;
  }
  return true;
}

/// Whether `text` then EOS is a complete output of `constraint`.
inline bool accepts(const std::shared_ptr<const CompiledConstraint>& constraint,
                    std::string_view text) {
  ConstraintMatcher matcher(constraint, {kEos});
  if (!walk(matcher, text)) return false;
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  matcher.fill_next_token_mask(mask);
  return allowed(mask, kEos) && matcher.accept_token(kEos) && matcher.is_terminated();
}

}  // namespace pagoda::structured::testing
