#include "server/http_server.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <exception>

#include "server/http_session.h"
#include "server/openai_service.h"

namespace pagoda::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpServer::Impl {
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> work = net::make_work_guard(io);
  // On a strand: accept handlers and begin_drain's close run on different io threads.
  tcp::acceptor acceptor{net::make_strand(io)};
  // Retries accept after a failure such as EMFILE without spinning.
  net::steady_timer accept_retry{acceptor.get_executor()};
  std::vector<std::thread> threads;
};

namespace {

void run_io(net::io_context& io) {
  // Named so that per-thread CPU time (/proc/PID/task/*/stat, top -H) shows the HTTP layer's
  // own cost apart from the engine's: bench/http/load.py measures it that way.
  pthread_setname_np(pthread_self(), "pagoda-http");
  // A handler that throws (out of memory, say) loses its connection, not the server.
  while (true) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      spdlog::error("http: unexpected exception in a handler: {}", e.what());
    }
  }
}

}  // namespace

HttpServer::HttpServer(ServerConfig config)
    : config_(std::move(config)), impl_(std::make_unique<Impl>()) {}

HttpServer::~HttpServer() {
  stop();
  // Sessions still queued in the io_context unregister themselves from sessions_ as they are
  // destroyed, so the io_context must go before the members they touch.
  impl_.reset();
}

Status HttpServer::start() {
  PAGODA_RETURN_IF_ERROR(config_.validate());
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->io);
  const auto endpoints =
      resolver.resolve(config_.host, std::to_string(config_.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return Status(StatusCode::kUnavailable,
                  "cannot resolve --host " + config_.host + ": " + ec.message());
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status(StatusCode::kUnavailable, "cannot listen on " + config_.host + ":" +
                                                std::to_string(config_.port) + ": " + ec.message() +
                                                " (is another server using the port? try --port)");
  }
  port_ = acceptor.local_endpoint().port();
  accept();
  for (int i = 0; i < config_.num_threads; ++i) {
    impl_->threads.emplace_back([this] { run_io(impl_->io); });
  }
  return Status::ok_status();
}

void HttpServer::accept() {
  impl_->acceptor.async_accept(
      net::make_strand(impl_->io), [this](boost::system::error_code ec, tcp::socket socket) {
        if (!impl_->acceptor.is_open()) return;
        if (ec) {
          // Out of descriptors or memory: wait for connections to close instead of spinning.
          spdlog::warn("http: accept failed: {}", ec.message());
          impl_->accept_retry.expires_after(std::chrono::milliseconds(100));
          impl_->accept_retry.async_wait([this](boost::system::error_code) {
            if (impl_->acceptor.is_open()) accept();
          });
          return;
        }
        std::make_shared<HttpSession>(std::move(socket), *this)->start();
        accept();
      });
}

void HttpServer::set_service(std::shared_ptr<OpenAiService> service) {
  std::lock_guard lock(mutex_);
  service_ = std::move(service);
}

std::shared_ptr<OpenAiService> HttpServer::service() const {
  std::lock_guard lock(mutex_);
  return service_;
}

void HttpServer::begin_drain() {
  // The port stays open: a load balancer's next probe must read 503 ("take me out"), not a
  // refused connection, and a request that was already on its way gets a clear answer.
  if (draining_.exchange(true)) return;
  for_each_session(&HttpSession::drain);
}

bool HttpServer::wait_until_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (active_requests_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  if (stopped_.exchange(true)) return;
  if (!impl_->threads.empty()) {
    begin_drain();
    net::post(impl_->acceptor.get_executor(), [this] {
      boost::system::error_code ec;
      impl_->acceptor.close(ec);
      impl_->accept_retry.cancel();
    });
    for_each_session(&HttpSession::close);
    // Closed sessions finish their handlers and go; give them a moment before the io threads
    // stop, so none is cut off half-way through a handler's bookkeeping.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (num_connections() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  impl_->work.reset();
  impl_->io.stop();
  for (std::thread& thread : impl_->threads) thread.join();
  impl_->threads.clear();
}

std::int64_t HttpServer::num_connections() const {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(sessions_.size());
}

void HttpServer::register_session(HttpSession* session, std::weak_ptr<HttpSession> weak) {
  std::lock_guard lock(mutex_);
  sessions_.emplace(session, std::move(weak));
}

void HttpServer::unregister_session(HttpSession* session) {
  std::lock_guard lock(mutex_);
  sessions_.erase(session);
}

void HttpServer::for_each_session(void (HttpSession::*action)()) {
  std::vector<std::shared_ptr<HttpSession>> sessions;
  {
    std::lock_guard lock(mutex_);
    sessions.reserve(sessions_.size());
    for (const auto& [raw, weak] : sessions_) {
      if (auto session = weak.lock()) sessions.push_back(std::move(session));
    }
  }
  // Outside the lock: dropping the last reference runs a destructor that takes it.
  for (const auto& session : sessions) (session.get()->*action)();
}

}  // namespace pagoda::server
