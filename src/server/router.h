// Which endpoint a request line names. Matching ignores the query string; a known path with the
// wrong method is 405 (with the methods it allows), anything else 404.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::server {

/// The endpoints the server answers.
enum class Endpoint : std::uint8_t {
  kHealth,
  kVersion,
  kMetrics,
  kModels,  ///< GET /v1/models
  kModel,   ///< GET /v1/models/{name}
  kChatCompletions,
  kCompletions,
  kTokenize,
  kDetokenize,
  kTokenizerInfo,  ///< GET /tokenizer_info (vLLM's; lm-evaluation-harness probes it)
};

/// The outcome of routing one request.
struct Route {
  /// 200 when matched, else 404 or 405.
  int http_status = 200;
  Endpoint endpoint = Endpoint::kHealth;
  /// GET /v1/models/{name}: the name (percent-decoded).
  std::string model_name;
  /// 405: the Allow header's value.
  std::string allow;
};

/// Routes `method` + `target` (the request-target: path and optional query).
Route route_request(std::string_view method, std::string_view target);

/// The path part of a request-target (before '?').
std::string_view target_path(std::string_view target);

/// Whether the endpoint takes a JSON body (POST).
bool takes_json_body(Endpoint endpoint);

/// Whether the endpoint runs the model (its requests hold engine resources).
bool is_generation(Endpoint endpoint);

/// Whether `--api-key` guards the path: every /v1 path, as vLLM does; /health, /metrics,
/// /version, /tokenize and /detokenize stay open.
bool requires_api_key(std::string_view path);

}  // namespace pagoda::server
