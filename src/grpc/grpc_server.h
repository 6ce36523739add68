// The gRPC server of `pagoda serve`: pagoda.v1.InferenceService, grpc.health.v1.Health and
// server reflection (v1 and v1alpha) on one port, beside the HTTP server. Like the HTTP server it listens before
// the model has loaded, answering UNAVAILABLE (and health NOT_SERVING) until set_backend().
//
// Shutdown, as `pagoda serve` drives it on SIGTERM:
//   begin_drain()            health NOT_SERVING; new calls get UNAVAILABLE; streams go on
//   wait_until_idle(grace)   Generate calls in flight finish
//   (the engine aborts the rest; their streams end with finish_reason ABORT)
//   stop(grace)              write the last messages, cancel what is left, join the threads
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "grpc/grpc_server_config.h"
#include "grpc/inference_backend.h"
#include "pagoda/status.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace pagoda::grpc {

class InferenceService;
class ReflectionService;

/// Owns the gRPC server. Methods are thread-safe.
class GrpcServer {
 public:
  explicit GrpcServer(GrpcServerConfig config);
  /// stop().
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  /// Binds and starts serving (UNAVAILABLE to every pagoda.v1 call until set_backend()).
  /// INVALID_ARGUMENT for a bad config; UNAVAILABLE when the address cannot be bound.
  Status start();
  /// The bound port (useful with port 0).
  int port() const { return port_; }

  /// Makes the server ready: calls are served by `backend`, health says SERVING.
  void set_backend(InferenceBackend backend);
  /// Health NOT_SERVING; new calls get UNAVAILABLE; calls in flight go on.
  void begin_drain();
  /// Waits until no Generate call is in flight or `timeout` passes; true when idle.
  bool wait_until_idle(std::chrono::milliseconds timeout) const;
  /// Generate calls in flight.
  std::int64_t num_active_calls() const;
  /// Closes the port, lets calls in flight finish for up to `grace`, then cancels the rest
  /// (their requests are aborted in the engine, which must still exist) and joins the threads.
  /// Idempotent.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

 private:
  void set_serving(bool serving);

  const GrpcServerConfig config_;
  std::unique_ptr<InferenceService> service_;
  std::unique_ptr<ReflectionService> reflection_;  // outlives server_, which calls it
  std::unique_ptr<::grpc::Server> server_;
  int port_ = 0;
  std::atomic<bool> stopped_{false};
};

}  // namespace pagoda::grpc
