// The API-key check: the Bearer scheme, exact key match, and the constant-time comparison's
// results (its timing is by construction: every byte is compared).
#include "server/api_key.h"

#include <gtest/gtest.h>

namespace pagoda::server {
namespace {

TEST(ApiKeyTest, AcceptsOnlyTheExactBearerToken) {
  EXPECT_TRUE(bearer_token_matches("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("Bearer  s3cret ", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cret!", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer S3CRET", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer ", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("", "s3cret"));
}

TEST(ApiKeyTest, ConstantTimeEqualIsEquality) {
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal("a", ""));
  // Same bytes repeated: the cyclic comparison must not mistake a prefix multiple for a match.
  EXPECT_FALSE(constant_time_equal("abcabc", "abc"));
}

}  // namespace
}  // namespace pagoda::server
