#include "server/router.h"

#include <array>

namespace pagoda::server {

namespace {

struct FixedRoute {
  std::string_view path;
  std::string_view method;
  Endpoint endpoint;
};

constexpr std::array<FixedRoute, 9> kFixedRoutes = {{
    {"/health", "GET", Endpoint::kHealth},
    {"/version", "GET", Endpoint::kVersion},
    {"/metrics", "GET", Endpoint::kMetrics},
    {"/v1/models", "GET", Endpoint::kModels},
    {"/v1/chat/completions", "POST", Endpoint::kChatCompletions},
    {"/v1/completions", "POST", Endpoint::kCompletions},
    {"/tokenize", "POST", Endpoint::kTokenize},
    {"/detokenize", "POST", Endpoint::kDetokenize},
    {"/tokenizer_info", "GET", Endpoint::kTokenizerInfo},
}};

constexpr std::string_view kModelPrefix = "/v1/models/";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Model names such as "org/model" arrive percent-encoded in the path.
std::string percent_decode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(in[i]);
  }
  return out;
}

// HEAD is what GET is, without the body (curl -I, load balancers).
bool method_matches(std::string_view allowed, std::string_view method) {
  return method == allowed || (allowed == "GET" && method == "HEAD");
}

Route method_not_allowed(std::string_view allowed) {
  Route route;
  route.http_status = 405;
  route.allow = allowed == "GET" ? "GET, HEAD" : std::string(allowed);
  return route;
}

}  // namespace

std::string_view target_path(std::string_view target) {
  return target.substr(0, target.find('?'));
}

Route route_request(std::string_view method, std::string_view target) {
  const std::string_view path = target_path(target);
  for (const FixedRoute& fixed : kFixedRoutes) {
    if (path != fixed.path) continue;
    if (!method_matches(fixed.method, method)) return method_not_allowed(fixed.method);
    return {.endpoint = fixed.endpoint};
  }
  if (path.size() > kModelPrefix.size() && path.starts_with(kModelPrefix)) {
    if (!method_matches("GET", method)) return method_not_allowed("GET");
    return {.endpoint = Endpoint::kModel,
            .model_name = percent_decode(path.substr(kModelPrefix.size()))};
  }
  return {.http_status = 404};
}

bool takes_json_body(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kChatCompletions:
    case Endpoint::kCompletions:
    case Endpoint::kTokenize:
    case Endpoint::kDetokenize: return true;
    default: return false;
  }
}

bool is_generation(Endpoint endpoint) {
  return endpoint == Endpoint::kChatCompletions || endpoint == Endpoint::kCompletions;
}

bool requires_api_key(std::string_view path) {
  return path == "/v1" || path.starts_with("/v1/");
}

}  // namespace pagoda::server
