// One client connection: reads requests (size limits, slow-loris timeouts, keep-alive and
// pipelining), routes and authenticates them, and writes the answers, streaming server-sent
// events with chunked transfer encoding. Everything runs on the connection's strand.
//
//   kIdle ──first byte──> kHeader ──header──> kBody ──body──> kHandling ──written──> kIdle
//     │                     │ 431 / 408         │ 413 / 408      │ client gone: abort
//     └──idle timeout──> closed                 └──> kLingering ──> closed
//
// While a request is handled a read stays pending, so a client that disconnects is noticed at
// once (EOF) even when nothing is being written, and its request is aborted in the engine.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "api/api_error.h"
#include "api/generation_job.h"
#include "server/http_reply.h"
#include "server/router.h"
#include "structured/constraint_compiler.h"

namespace pagoda::server {

class GenerationCall;
class HttpServer;
class OpenAiService;

/// A connection; owned by the asynchronous operations pending on it.
class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  /// `socket` must use a strand executor.
  HttpSession(boost::asio::ip::tcp::socket socket, HttpServer& server);
  ~HttpSession();

  /// Starts reading the first request.
  void start();
  /// Server draining: an idle connection closes, a busy one closes after its response.
  void drain();
  /// Closes the connection now, aborting what it is doing.
  void close();

 private:
  enum class Phase { kIdle, kHeader, kBody, kHandling, kLingering, kClosed };
  using Clock = std::chrono::steady_clock;
  using Request = boost::beast::http::request<boost::beast::http::string_body>;

  // Reading.
  void begin_request();
  void parse_input();
  void start_read();
  void on_read(boost::beast::error_code ec, std::size_t size);
  void on_header();
  void on_parse_error(boost::beast::error_code ec);

  // Deadlines (one timer: the phase decides what expiry means).
  void arm_deadline(Clock::time_point deadline);
  void arm_write_deadline();
  void on_deadline();

  // Handling.
  void on_request();
  void dispatch();
  void start_generation(OpenAiService& service, Endpoint endpoint, const api::Json& body);
  void on_constraint_compiled(structured::CompileResult compiled);
  void submit_generation(api::GenerationJob job);
  void pump_outputs();

  // Writing.
  void reply(const HttpReply& reply, bool close_after = false);
  void write_stream_header();
  void write_chunk(std::string data, bool last);
  void on_written(boost::beast::error_code ec);
  void finish_request();
  void client_gone();
  void linger_close();
  void close_socket();
  void log_request() const;

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer deadline_;
  HttpServer& server_;
  Phase phase_ = Phase::kIdle;
  bool first_request_ = true;
  bool draining_ = false;

  std::array<char, 8 * 1024> read_chunk_;
  std::string inbox_;  // received, not yet parsed (pipelined requests included)
  bool read_pending_ = false;
  Clock::time_point input_deadline_;  // when the awaited part of the request is due
  bool timer_armed_ = false;          // a wait on deadline_ is pending
  std::int64_t discarded_bytes_ = 0;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;

  // The request being handled.
  Request request_;
  Clock::time_point started_at_;
  bool keep_alive_ = true;
  bool counted_active_ = false;
  bool client_gone_ = false;
  int status_ = 0;
  // Keeps the session alive while it handles a request, whatever operations are pending.
  std::shared_ptr<HttpSession> hold_;
  // The service a generation runs on stays alive as long as the generation.
  std::shared_ptr<OpenAiService> service_;
  // A job waiting for its constraint's compile (on the compiler's threads, never this one);
  // closing the connection drops both, which cancels the wait.
  std::optional<api::GenerationJob> compiling_job_;
  structured::CompileTicket compile_ticket_;
  std::unique_ptr<GenerationCall> call_;
  std::shared_ptr<std::atomic<bool>> wake_posted_ = std::make_shared<std::atomic<bool>>(false);

  // Writing: one write at a time; the response object lives until its write completes.
  bool write_pending_ = false;
  bool close_after_write_ = false;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> response_;
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> stream_header_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>>
      stream_serializer_;
  std::string chunk_;    // the chunk being written
  bool chunked_ = true;  // false for HTTP/1.0 clients
  bool stream_done_ = false;
};

}  // namespace pagoda::server
