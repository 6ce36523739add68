// Settings of the HTTP transport: where to listen, how many threads, and the limits that keep
// hostile or impatient clients from holding the server (sizes, timeouts, drain grace).
//
//   connection accepted ──(first byte within header_timeout)──> reading the header
//   idle after a response ──(next byte within idle_timeout)───> reading the header
//   first byte of a request ──(whole header within header_timeout)──> body
//   header done ──(whole body within body_timeout)──> handled
//   each write ──(done within write_timeout, or the client is gone)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "pagoda/status.h"

namespace pagoda::server {

/// The HTTP server's own settings (the engine's are EngineConfig).
struct ServerConfig {
  std::string host = "127.0.0.1";
  /// 0 picks a free port (tests read it back from HttpServer::port()).
  int port = 8000;
  /// Threads running the io_context; HTTP work is light next to the model.
  int num_threads = 2;
  /// Bearer token every /v1 request must carry; empty: no authentication.
  std::string api_key;

  /// Request line + header fields; larger gets 431.
  std::int64_t max_header_bytes = 16 * 1024;
  /// Request body; larger gets 413. 8 MiB is ~1M tokens of JSON token ids, far beyond any
  /// context length, while a 10 MB body is refused from its Content-Length alone.
  std::int64_t max_body_bytes = 8 * 1024 * 1024;

  std::chrono::milliseconds header_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds write_timeout{60'000};
  /// After SIGTERM: how long accepted requests may take to finish before they are aborted.
  std::chrono::milliseconds shutdown_grace{30'000};

  /// One log line per finished request.
  bool log_requests = true;

  /// INVALID_ARGUMENT naming the flag that is out of range.
  Status validate() const;
};

}  // namespace pagoda::server
