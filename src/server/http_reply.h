// A complete, non-streaming HTTP answer as the handlers produce it; the session turns it into a
// Beast response. Kept free of Beast types so handlers and tests need no Asio.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/api_error.h"

namespace pagoda::server {

/// Status, content type, extra headers and body of one response.
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  /// 200 (or `status`) with a JSON body.
  static HttpReply json(const api::Json& body, int status = 200);
  /// The OpenAI-shaped error body with its HTTP status; 429 and 503 also say when to retry.
  static HttpReply error(const api::ApiError& error);
};

/// An ApiError for a transport-level problem (405, 408, 415, 431, ...), typed by its status.
api::ApiError transport_error(int http_status, std::string message,
                              std::optional<std::string> param = std::nullopt);

}  // namespace pagoda::server
