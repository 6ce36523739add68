// The HTTP/1.1 server: an acceptor and a few io threads (Boost.Asio), one HttpSession per
// connection on its own strand. It listens before the model has loaded, so /health can say 503
// until set_service() makes it ready.
//
// Shutdown, as `pagoda serve` drives it on SIGTERM:
//   begin_drain()            /health and new requests get 503 (the port stays open, so load
//                            balancers read "take me out", not a refused connection); idle
//                            kept-alive connections close; requests in flight go on
//   wait_until_idle(grace)   accepted requests finish and their responses are written
//   (engine aborts the rest; their final outputs are written the same way)
//   stop()                   stop accepting, close what is left, join the threads
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pagoda/status.h"
#include "server/server_config.h"

namespace pagoda::server {

class HttpSession;
class OpenAiService;

/// Accepts connections and owns the io threads. Methods are thread-safe.
class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  /// stop().
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds, listens and starts the io threads. UNAVAILABLE when the address cannot be bound
  /// (port in use, no such interface).
  Status start();
  /// The bound port (useful with port 0).
  int port() const { return port_; }

  /// Makes the server ready: endpoints answer with `service` from now on.
  void set_service(std::shared_ptr<OpenAiService> service);
  /// The service, or nullptr while loading.
  std::shared_ptr<OpenAiService> service() const;

  /// Answers /health and new requests with 503 from now on; in-flight requests go on. Still
  /// accepts connections (their requests get the 503) until stop().
  void begin_drain();
  bool draining() const { return draining_.load(); }
  /// Waits until no accepted request is in flight or `timeout` passes; true when idle.
  bool wait_until_idle(std::chrono::milliseconds timeout) const;
  /// Stops accepting, closes every connection and joins the io threads. Idempotent.
  void stop();

  /// Requests received in full and not yet answered in full.
  std::int64_t num_active_requests() const { return active_requests_.load(); }
  /// Open connections.
  std::int64_t num_connections() const;

  const ServerConfig& config() const { return config_; }

 private:
  friend class HttpSession;
  struct Impl;

  void accept();
  void register_session(HttpSession* session, std::weak_ptr<HttpSession> weak);
  void unregister_session(HttpSession* session);
  void request_started() { active_requests_.fetch_add(1); }
  void request_finished() { active_requests_.fetch_sub(1); }
  /// Posts `action` to every open session's strand.
  void for_each_session(void (HttpSession::*action)());

  const ServerConfig config_;
  std::unique_ptr<Impl> impl_;  // io_context, acceptor, threads (Asio types stay in the .cc)
  int port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<std::int64_t> active_requests_{0};

  mutable std::mutex mutex_;  // guards service_ and sessions_
  std::shared_ptr<OpenAiService> service_;
  std::unordered_map<HttpSession*, std::weak_ptr<HttpSession>> sessions_;
};

}  // namespace pagoda::server
