#include "grpc/grpc_server_config.h"

namespace pagoda::grpc {

Status GrpcServerConfig::validate() const {
  if (host.empty()) return invalid_argument("--host is empty; give an address such as 127.0.0.1");
  if (port < 0 || port > 65535) {
    return invalid_argument("--grpc-port must be in [0, 65535], got " + std::to_string(port));
  }
  if (max_receive_message_bytes < 1024 || max_receive_message_bytes > (std::int64_t{1} << 30)) {
    return invalid_argument("the gRPC message limit must be in [1 KiB, 1 GiB]");
  }
  return Status::ok_status();
}

}  // namespace pagoda::grpc
