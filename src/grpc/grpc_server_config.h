// Settings of the gRPC transport (the engine's are EngineConfig, HTTP's ServerConfig).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "pagoda/status.h"

namespace pagoda::grpc {

/// Where the gRPC server listens and what it demands of callers.
struct GrpcServerConfig {
  std::string host = "127.0.0.1";
  /// 0 picks a free port (read it back from GrpcServer::port()); `pagoda serve --grpc-port 0`
  /// does not start the server at all.
  int port = 50051;
  /// Bearer token every pagoda.v1 call must carry; empty: no authentication.
  std::string api_key;
  /// Largest request message; the HTTP body limit, so both transports take the same inputs.
  std::int64_t max_receive_message_bytes = 8 * 1024 * 1024;

  /// INVALID_ARGUMENT naming the flag that is out of range.
  Status validate() const;
};

}  // namespace pagoda::grpc
