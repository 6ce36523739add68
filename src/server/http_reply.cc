#include "server/http_reply.h"

namespace pagoda::server {

namespace {

StatusCode status_code_for_http(int http_status) {
  switch (http_status) {
    case 401: return StatusCode::kUnauthenticated;
    case 404: return StatusCode::kNotFound;
    case 408: return StatusCode::kDeadlineExceeded;
    case 413:
    case 429:
    case 431: return StatusCode::kResourceExhausted;
    case 503: return StatusCode::kUnavailable;
    default: break;
  }
  return http_status >= 500 ? StatusCode::kInternal : StatusCode::kInvalidArgument;
}

}  // namespace

HttpReply HttpReply::json(const api::Json& body, int status) {
  HttpReply reply;
  reply.status = status;
  reply.body = body.dump(-1, ' ', false, api::Json::error_handler_t::replace);
  return reply;
}

HttpReply HttpReply::error(const api::ApiError& error) {
  HttpReply reply;
  reply.status = error.http_status;
  reply.body = error.body();
  // Clients (the openai SDK included) back off by this header when the queue is full.
  if (error.http_status == 429 || error.http_status == 503) {
    reply.headers.emplace_back("Retry-After", "1");
  }
  if (error.http_status == 401) reply.headers.emplace_back("WWW-Authenticate", "Bearer");
  return reply;
}

api::ApiError transport_error(int http_status, std::string message,
                              std::optional<std::string> param) {
  return {.code = status_code_for_http(http_status),
          .http_status = http_status,
          .type = std::string(api::openai_error_type(http_status)),
          .message = std::move(message),
          .param = std::move(param)};
}

}  // namespace pagoda::server
