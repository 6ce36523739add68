#include "server/server_config.h"

namespace pagoda::server {

Status ServerConfig::validate() const {
  if (host.empty()) return invalid_argument("--host is empty; give an address such as 127.0.0.1");
  if (port < 0 || port > 65535) {
    return invalid_argument("--port must be in [0, 65535], got " + std::to_string(port));
  }
  if (num_threads < 1 || num_threads > 256) {
    return invalid_argument("--http-threads must be in [1, 256], got " +
                            std::to_string(num_threads));
  }
  if (max_header_bytes < 1024) return invalid_argument("the header limit must be at least 1 KiB");
  if (max_body_bytes < 1024) {
    return invalid_argument("--max-request-body-bytes must be at least 1024, got " +
                            std::to_string(max_body_bytes));
  }
  const auto positive = [](std::chrono::milliseconds t) { return t.count() > 0; };
  if (!positive(header_timeout) || !positive(body_timeout) || !positive(idle_timeout) ||
      !positive(write_timeout)) {
    return invalid_argument("HTTP timeouts must be positive");
  }
  if (shutdown_grace.count() < 0) {
    return invalid_argument("--shutdown-grace-seconds must not be negative");
  }
  return Status::ok_status();
}

}  // namespace pagoda::server
