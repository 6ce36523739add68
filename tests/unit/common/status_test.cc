#include "pagoda/status.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

StatusOr<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("must be positive, got " + std::to_string(v));
  return v;
}

StatusOr<int> twice(int v) {
  PAGODA_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(StatusTest, MapsCodesToHttp) {
  EXPECT_EQ(status_code_http(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(status_code_http(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(status_code_http(StatusCode::kNotFound), 404);
  EXPECT_EQ(status_code_http(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(status_code_http(StatusCode::kUnavailable), 503);
}

TEST(StatusTest, AssignOrReturnPropagates) {
  EXPECT_EQ(*twice(4), 8);
  auto bad = twice(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().to_string(), "invalid_argument: must be positive, got -1");
}

}  // namespace
}  // namespace pagoda
