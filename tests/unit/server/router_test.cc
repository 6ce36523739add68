// Routing: every endpoint by method and path, 405 with the allowed methods, 404 otherwise, query
// strings ignored, model names percent-decoded; which paths the API key guards.
#include "server/router.h"

#include <gtest/gtest.h>

namespace pagoda::server {
namespace {

TEST(RouterTest, MatchesEveryEndpoint) {
  EXPECT_EQ(route_request("GET", "/health").endpoint, Endpoint::kHealth);
  EXPECT_EQ(route_request("GET", "/version").endpoint, Endpoint::kVersion);
  EXPECT_EQ(route_request("GET", "/metrics").endpoint, Endpoint::kMetrics);
  EXPECT_EQ(route_request("GET", "/v1/models").endpoint, Endpoint::kModels);
  EXPECT_EQ(route_request("POST", "/v1/chat/completions").endpoint, Endpoint::kChatCompletions);
  EXPECT_EQ(route_request("POST", "/v1/completions").endpoint, Endpoint::kCompletions);
  EXPECT_EQ(route_request("POST", "/tokenize").endpoint, Endpoint::kTokenize);
  EXPECT_EQ(route_request("POST", "/detokenize").endpoint, Endpoint::kDetokenize);
  EXPECT_EQ(route_request("GET", "/tokenizer_info").endpoint, Endpoint::kTokenizerInfo);
  EXPECT_EQ(route_request("HEAD", "/health").endpoint, Endpoint::kHealth);
}

TEST(RouterTest, IgnoresTheQueryString) {
  const Route route = route_request("GET", "/health?probe=1");
  EXPECT_EQ(route.http_status, 200);
  EXPECT_EQ(route.endpoint, Endpoint::kHealth);
  EXPECT_EQ(target_path("/v1/models?x=%3F"), "/v1/models");
}

TEST(RouterTest, WrongMethodIs405WithAllow) {
  Route route = route_request("GET", "/v1/chat/completions");
  EXPECT_EQ(route.http_status, 405);
  EXPECT_EQ(route.allow, "POST");
  route = route_request("POST", "/health");
  EXPECT_EQ(route.http_status, 405);
  EXPECT_EQ(route.allow, "GET, HEAD");
  EXPECT_EQ(route_request("DELETE", "/v1/models/x").http_status, 405);
}

TEST(RouterTest, UnknownPathsAre404) {
  EXPECT_EQ(route_request("GET", "/").http_status, 404);
  EXPECT_EQ(route_request("GET", "/v1/models/").http_status, 404);
  EXPECT_EQ(route_request("POST", "/v1/chat/completions/").http_status, 404);
  EXPECT_EQ(route_request("GET", "/HEALTH").http_status, 404);
  EXPECT_EQ(route_request("POST", "/v1/embeddings").http_status, 404);
}

TEST(RouterTest, ModelNamesArePercentDecoded) {
  const Route route = route_request("GET", "/v1/models/org%2Fmodel%20v2");
  EXPECT_EQ(route.endpoint, Endpoint::kModel);
  EXPECT_EQ(route.model_name, "org/model v2");
  // A broken escape stays as it is.
  EXPECT_EQ(route_request("GET", "/v1/models/a%zz%4").model_name, "a%zz%4");
}

TEST(RouterTest, ApiKeyGuardsOnlyV1Paths) {
  EXPECT_TRUE(requires_api_key("/v1/models"));
  EXPECT_TRUE(requires_api_key("/v1/chat/completions"));
  EXPECT_TRUE(requires_api_key("/v1"));
  EXPECT_FALSE(requires_api_key("/health"));
  EXPECT_FALSE(requires_api_key("/metrics"));
  EXPECT_FALSE(requires_api_key("/tokenize"));
  EXPECT_FALSE(requires_api_key("/v10/models"));
}

}  // namespace
}  // namespace pagoda::server
