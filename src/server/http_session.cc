#include "server/http_session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <exception>
#include <utility>

#include "api/model_list.h"
#include "api/request_body.h"
#include "api/structured_output.h"
#include "server/api_key.h"
#include "server/generation_call.h"
#include "server/http_server.h"
#include "server/openai_service.h"

namespace pagoda::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

namespace {

// Bytes read ahead while a request is handled (pipelined requests, or a client that keeps
// sending); past this the session stops reading and TCP pushes back.
constexpr std::size_t kMaxReadAheadBytes = 64 * 1024;
// After an error response the connection is closed only once the client has stopped sending,
// so it reads the response instead of a reset: at most this long and this much is discarded.
constexpr auto kLingerTimeout = std::chrono::seconds(2);
constexpr std::int64_t kMaxLingerBytes = std::int64_t{64} << 20;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

// The 503 of /health and of new requests while the server drains (SIGTERM).
constexpr std::string_view kShuttingDown =
    "the server is shutting down: requests in flight finish, new ones are not accepted; "
    "send them to another replica";

// Beast 1.74 speaks boost::string_view.
std::string_view view(beast::string_view text) {
  return {text.data(), text.size()};
}

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// application/json, with or without parameters (charset), or a +json type. A missing
// Content-Type is accepted: plenty of hand-written clients leave it out.
bool is_json_content_type(std::string_view value) {
  std::string type = lowercase(value.substr(0, value.find(';')));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  while (!type.empty() && type.front() == ' ') type.erase(0, 1);
  return type.empty() || type == "application/json" ||
         (type.starts_with("application/") && type.ends_with("+json"));
}

std::string seconds_text(std::chrono::milliseconds t) {
  return fmt::format("{:g}", static_cast<double>(t.count()) / 1000.0);
}

}  // namespace

HttpSession::HttpSession(net::ip::tcp::socket socket, HttpServer& server)
    : socket_(std::move(socket)), deadline_(socket_.get_executor()), server_(server) {}

HttpSession::~HttpSession() {
  call_.reset();  // aborts an unfinished request
  if (counted_active_) server_.request_finished();
  server_.unregister_session(this);
}

void HttpSession::start() {
  server_.register_session(this, weak_from_this());
  // Accepted just as the server began to drain, after drain() reached every session.
  draining_ = server_.draining();
  beast::error_code ec;
  socket_.set_option(net::ip::tcp::no_delay(true), ec);  // SSE events go out as they are made
  begin_request();
}

void HttpSession::drain() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    self->draining_ = true;
    self->keep_alive_ = false;
    // A kept-alive connection between requests closes; a new one has a request on its way,
    // which gets its 503.
    if (self->phase_ == Phase::kIdle && self->inbox_.empty() && !self->first_request_) {
      self->close_socket();
    }
  });
}

void HttpSession::close() {
  net::post(socket_.get_executor(), [self = shared_from_this()] { self->close_socket(); });
}

// ---- Reading ----------------------------------------------------------------------------------

void HttpSession::begin_request() {
  const ServerConfig& config = server_.config();
  parser_.emplace();
  parser_->header_limit(static_cast<std::uint32_t>(config.max_header_bytes));
  parser_->body_limit(static_cast<std::uint64_t>(config.max_body_bytes));
  request_ = {};
  status_ = 0;
  client_gone_ = false;
  close_after_write_ = false;
  keep_alive_ = !draining_;
  stream_done_ = false;
  phase_ = Phase::kIdle;
  if (draining_ && inbox_.empty() && !first_request_) {
    close_socket();
    return;
  }
  // A new connection must start talking as soon as a request's header is due; a kept-alive
  // one may wait longer between requests.
  input_deadline_ = Clock::now() + (first_request_ ? config.header_timeout : config.idle_timeout);
  parse_input();
}

void HttpSession::parse_input() {
  const ServerConfig& config = server_.config();
  if (phase_ == Phase::kIdle && !inbox_.empty()) {
    phase_ = Phase::kHeader;
    started_at_ = Clock::now();
    input_deadline_ = started_at_ + config.header_timeout;
  }
  beast::error_code ec;
  while (!inbox_.empty() && !parser_->is_done()) {
    const std::size_t used = parser_->put(net::buffer(inbox_), ec);
    inbox_.erase(0, used);
    if (ec == http::error::need_more) break;
    if (ec) {
      on_parse_error(ec);
      return;
    }
    if (phase_ == Phase::kHeader && parser_->is_header_done()) {
      phase_ = Phase::kBody;
      input_deadline_ = Clock::now() + config.body_timeout;
      on_header();
    }
    if (used == 0) break;
  }
  if (parser_->is_done()) {
    on_request();
    return;
  }
  // Timer updates cost a lock and often a syscall, so the timer only ever moves earlier here.
  // When it fires before input_deadline_ (the deadline moved later since: a kept-alive
  // connection's next request), on_deadline re-arms it; a busy connection touches its timer
  // about once per timeout, not once per request.
  if (!timer_armed_ || deadline_.expiry() > input_deadline_) arm_deadline(input_deadline_);
  start_read();
}

void HttpSession::on_header() {
  const auto& header = parser_->get();
  // curl asks before sending a large body; the limit was already checked on Content-Length.
  if (beast::iequals(header[http::field::expect], "100-continue")) {
    beast::error_code ec;
    // Nothing else is being written while a request is read, so this never waits.
    net::write(socket_, net::buffer(kContinue.data(), kContinue.size()), ec);
  }
}

void HttpSession::start_read() {
  if (read_pending_ || phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kHandling && inbox_.size() >= kMaxReadAheadBytes) return;
  read_pending_ = true;
  socket_.async_read_some(net::buffer(read_chunk_),
                          [self = shared_from_this()](beast::error_code ec, std::size_t size) {
                            self->on_read(ec, size);
                          });
}

void HttpSession::on_read(beast::error_code ec, std::size_t size) {
  read_pending_ = false;
  if (phase_ == Phase::kClosed) return;
  if (ec) {
    // EOF or reset. Mid-request there is no one left to answer; while handling, the request
    // is abandoned and must stop using the engine.
    if (phase_ == Phase::kHandling) {
      client_gone();
    } else {
      close_socket();
    }
    return;
  }
  if (phase_ == Phase::kLingering) {
    discarded_bytes_ += static_cast<std::int64_t>(size);
    if (discarded_bytes_ > kMaxLingerBytes) {
      close_socket();
    } else {
      start_read();
    }
    return;
  }
  inbox_.append(read_chunk_.data(), size);
  if (phase_ == Phase::kHandling) {
    start_read();
    return;
  }
  parse_input();
}

void HttpSession::on_parse_error(beast::error_code ec) {
  const ServerConfig& config = server_.config();
  if (ec == http::error::header_limit) {
    reply(HttpReply::error(transport_error(431, "the request line and headers are over " +
                                                    std::to_string(config.max_header_bytes) +
                                                    " bytes")),
          /*close_after=*/true);
  } else if (ec == http::error::body_limit) {
    // Beast reports the limit on a Content-Length over it before the header is complete, when
    // content_length() may not be asked (a debug build asserts), or later in a chunked body.
    const boost::optional<std::uint64_t> length =
        parser_->is_header_done() ? parser_->content_length() : boost::none;
    reply(HttpReply::error(api::ApiError::payload_too_large(
              length ? std::optional(static_cast<std::int64_t>(*length)) : std::nullopt,
              config.max_body_bytes)),
          /*close_after=*/true);
  } else {
    reply(HttpReply::error(transport_error(400, "malformed HTTP request: " + ec.message())),
          /*close_after=*/true);
  }
}

// ---- Deadlines --------------------------------------------------------------------------------

void HttpSession::arm_deadline(Clock::time_point deadline) {
  deadline_.expires_at(deadline);
  timer_armed_ = true;
  deadline_.async_wait([weak = weak_from_this()](beast::error_code ec) {
    if (ec) return;  // re-armed or cancelled
    if (auto self = weak.lock()) {
      self->timer_armed_ = false;
      self->on_deadline();
    }
  });
}

void HttpSession::arm_write_deadline() {
  // Re-armed only when less than half the timeout is left (or a longer input deadline is set),
  // so a stream of small writes does not update the timer for every event.
  const auto timeout = server_.config().write_timeout;
  const auto now = Clock::now();
  if (deadline_.expiry() < now + timeout / 2 || deadline_.expiry() > now + timeout) {
    arm_deadline(now + timeout);
  }
}

void HttpSession::on_deadline() {
  // The expiry may have been queued just before the timer was re-armed.
  const auto now = Clock::now();
  if (deadline_.expiry() > now) return;
  const bool reading = phase_ == Phase::kIdle || phase_ == Phase::kHeader || phase_ == Phase::kBody;
  if (reading && now < input_deadline_) {
    arm_deadline(input_deadline_);
    return;
  }
  const ServerConfig& config = server_.config();
  switch (phase_) {
    case Phase::kIdle:
    case Phase::kLingering: close_socket(); return;
    case Phase::kHeader:
      reply(HttpReply::error(transport_error(408, "the request header did not arrive within " +
                                                      seconds_text(config.header_timeout) +
                                                      " seconds")),
            /*close_after=*/true);
      return;
    case Phase::kBody:
      reply(HttpReply::error(transport_error(408, "the request body did not arrive within " +
                                                      seconds_text(config.body_timeout) +
                                                      " seconds")),
            /*close_after=*/true);
      return;
    case Phase::kHandling:
      // A write that does not finish: the client stopped reading.
      if (write_pending_) client_gone();
      return;
    case Phase::kClosed: return;
  }
}

// ---- Handling ---------------------------------------------------------------------------------

void HttpSession::on_request() {
  // The input deadline may still fire; in kHandling it only counts while a write is pending,
  // and every write arms its own.
  phase_ = Phase::kHandling;
  request_ = parser_->release();
  first_request_ = false;
  keep_alive_ = request_.keep_alive() && !draining_;
  server_.request_started();
  counted_active_ = true;
  // Generations are owned here; the pending read keeps the session alive only while the
  // client is connected, and the engine holds no strong reference.
  hold_ = shared_from_this();
  start_read();
  try {
    dispatch();
  } catch (const std::exception& e) {
    // A bug or out of memory in one request must not leave the connection hanging.
    spdlog::error("http: {} {} failed: {}", std::string(request_.method_string()),
                  std::string(request_.target()), e.what());
    reply(HttpReply::error(transport_error(500, "internal error while handling the request")),
          /*close_after=*/true);
  }
}

void HttpSession::dispatch() {
  const ServerConfig& config = server_.config();
  const std::string method(request_.method_string());
  const std::string_view target = view(request_.target());
  const std::string path(target_path(target));
  const Route route = route_request(method, target);
  if (route.http_status == 404) {
    reply(HttpReply::error(transport_error(404, "no endpoint at " + path)));
    return;
  }
  if (route.http_status == 405) {
    HttpReply error = HttpReply::error(transport_error(
        405, "method " + method + " is not allowed on " + path + "; use " + route.allow));
    error.headers.emplace_back("Allow", route.allow);
    reply(error);
    return;
  }
  if (!config.api_key.empty() && requires_api_key(path) &&
      !bearer_token_matches(view(request_[http::field::authorization]), config.api_key)) {
    reply(HttpReply::error(transport_error(
        401, "missing or invalid API key: send the header 'Authorization: Bearer <key>'")));
    return;
  }

  std::shared_ptr<OpenAiService> service = server_.service();
  switch (route.endpoint) {
    case Endpoint::kHealth:
      if (service && !server_.draining()) {
        reply({.status = 200, .content_type = "text/plain; charset=utf-8"});
      } else {
        reply(HttpReply::error(transport_error(
            503, service ? std::string(kShuttingDown) : "the model is still loading")));
      }
      return;
    case Endpoint::kVersion: reply(HttpReply::json(api::version_response())); return;
    default: break;
  }
  if (!service) {
    reply(HttpReply::error(
        transport_error(503, "the model is still loading; retry when /health answers 200")));
    return;
  }
  if (server_.draining() && takes_json_body(route.endpoint)) {
    if (is_generation(route.endpoint)) service->record_rejected(503);
    reply(HttpReply::error(transport_error(503, std::string(kShuttingDown))),
          /*close_after=*/true);
    return;
  }

  std::optional<api::Json> body;
  if (takes_json_body(route.endpoint)) {
    const std::string_view content_type = view(request_[http::field::content_type]);
    std::optional<api::ApiError> error;
    if (!is_json_content_type(content_type)) {
      error = transport_error(
          415, "Content-Type must be application/json, got '" + std::string(content_type) + "'",
          "Content-Type");
    } else {
      api::ApiErrorOr<api::Json> parsed = api::parse_request_body(request_.body());
      if (parsed.ok()) {
        body = std::move(*parsed);
      } else {
        error = parsed.error();
      }
    }
    if (error) {
      if (is_generation(route.endpoint)) service->record_rejected(error->http_status);
      reply(HttpReply::error(*error));
      return;
    }
  }

  switch (route.endpoint) {
    case Endpoint::kMetrics: reply(service->metrics()); return;
    case Endpoint::kModels: reply(service->models()); return;
    case Endpoint::kModel: reply(service->model(route.model_name)); return;
    case Endpoint::kTokenize: reply(service->tokenize(*body)); return;
    case Endpoint::kDetokenize: reply(service->detokenize(*body)); return;
    case Endpoint::kTokenizerInfo: reply(service->tokenizer_info()); return;
    case Endpoint::kChatCompletions:
    case Endpoint::kCompletions: start_generation(*service, route.endpoint, *body); return;
    case Endpoint::kHealth:
    case Endpoint::kVersion: return;  // answered above
  }
}

void HttpSession::start_generation(OpenAiService& service, Endpoint endpoint,
                                   const api::Json& body) {
  // X-Pagoda-Trace: 1 (or true) asks for a reasoning trace of this request.
  const beast::string_view trace_header = request_["X-Pagoda-Trace"];
  const bool trace = trace_header == "1" || beast::iequals(trace_header, "true");
  api::ApiErrorOr<api::GenerationJob> job = service.prepare_generation(endpoint, body, trace);
  if (!job.ok()) {
    service.record_rejected(job.error().http_status);
    reply(HttpReply::error(job.error()));
    return;
  }
  service_ = server_.service();
  if (!job->constraint) {
    submit_generation(std::move(*job));
    return;
  }
  // The compile runs on the compiler's threads; this strand serves other work meanwhile and
  // picks the request up again when the result is posted back (a cache hit posts at once).
  compiling_job_ = std::move(*job);
  compile_ticket_ = service.compile_constraint(
      *compiling_job_, [weak = weak_from_this(),
                        executor = socket_.get_executor()](structured::CompileResult compiled) {
        net::post(executor, [weak, compiled = std::move(compiled)]() mutable {
          if (auto self = weak.lock()) self->on_constraint_compiled(std::move(compiled));
        });
      });
}

void HttpSession::on_constraint_compiled(structured::CompileResult compiled) {
  if (phase_ != Phase::kHandling || !compiling_job_) return;  // the client left meanwhile
  compile_ticket_ = {};
  api::GenerationJob job = std::move(*compiling_job_);
  compiling_job_.reset();
  if (std::optional<api::ApiError> error = api::attach_constraint(job, compiled)) {
    service_->record_rejected(error->http_status);
    reply(HttpReply::error(*error));
    return;
  }
  submit_generation(std::move(job));
}

void HttpSession::submit_generation(api::GenerationJob job) {
  api::ApiErrorOr<std::unique_ptr<GenerationCall>> call =
      service_->start_generation(std::move(job));
  if (!call.ok()) {
    service_->record_rejected(call.error().http_status);
    reply(HttpReply::error(call.error()));
    return;
  }
  call_ = std::move(*call);
  // The engine thread only flips a flag and posts; the strand does the work. One post is
  // pending at most, however many outputs arrive meanwhile.
  call_->set_listener(
      [weak = weak_from_this(), executor = socket_.get_executor(), posted = wake_posted_] {
        if (posted->exchange(true)) return;
        net::post(executor, [weak, posted] {
          posted->store(false);
          if (auto self = weak.lock()) self->pump_outputs();
        });
      });
  if (call_->streaming()) {
    write_stream_header();
  } else {
    pump_outputs();
  }
}

void HttpSession::pump_outputs() {
  if (phase_ != Phase::kHandling || !call_ || write_pending_) return;  // on_written pumps again
  if (call_->streaming()) {
    if (stream_done_) return;
    std::string events = call_->drain();
    const bool last = call_->finished();
    if (last) {
      events += call_->finish_stream();
      stream_done_ = true;
    }
    if (!events.empty() || last) write_chunk(std::move(events), last);
    return;
  }
  call_->drain();
  if (!call_->finished()) return;
  api::EncodedBody encoded = call_->finish_body();
  reply({.status = encoded.http_status, .body = std::move(encoded.body)});
}

// ---- Writing ----------------------------------------------------------------------------------

void HttpSession::reply(const HttpReply& reply, bool close_after) {
  if (write_pending_) {  // cannot happen: handlers reply once, streams never reply
    close_socket();
    return;
  }
  phase_ = Phase::kHandling;
  status_ = reply.status;
  if (close_after) {
    close_after_write_ = true;
    keep_alive_ = false;
  }
  response_.emplace(static_cast<http::status>(reply.status), request_.version());
  response_->set(http::field::server, "pagoda");
  response_->set(http::field::content_type, reply.content_type);
  for (const auto& [name, value] : reply.headers) response_->set(name, value);
  response_->keep_alive(keep_alive_);
  response_->body() = reply.body;
  response_->prepare_payload();
  // HEAD: the headers GET would send (Content-Length included), no body.
  if (request_.method() == http::verb::head) response_->body().clear();
  write_pending_ = true;
  arm_write_deadline();
  http::async_write(
      socket_, *response_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
}

void HttpSession::write_stream_header() {
  stream_header_.emplace(http::status::ok, request_.version());
  stream_header_->set(http::field::server, "pagoda");
  stream_header_->set(http::field::content_type, "text/event-stream; charset=utf-8");
  stream_header_->set(http::field::cache_control, "no-cache");
  stream_header_->set("X-Accel-Buffering", "no");  // proxies must not hold events back
  // HTTP/1.0 has no chunked coding: the events are the body, which ends when the connection
  // closes.
  chunked_ = request_.version() >= 11;
  if (!chunked_) keep_alive_ = false;
  stream_header_->keep_alive(keep_alive_);
  stream_header_->chunked(chunked_);
  stream_serializer_.emplace(*stream_header_);
  status_ = 200;
  write_pending_ = true;
  arm_write_deadline();
  http::async_write_header(
      socket_, *stream_serializer_,
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
}

void HttpSession::write_chunk(std::string data, bool last) {
  // Chunked transfer coding (RFC 9112 section 7.1): hex size, CRLF, data, CRLF; "0" CRLF CRLF
  // ends the body. Everything gathered since the previous write goes out as one chunk.
  chunk_.clear();
  if (!chunked_) {
    chunk_ = std::move(data);
  } else if (!data.empty()) {
    char size[20];
    const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    chunk_.append(size, static_cast<std::size_t>(n));
    chunk_ += data;
    chunk_ += "\r\n";
  }
  if (last && chunked_) chunk_ += "0\r\n\r\n";
  write_pending_ = true;
  arm_write_deadline();
  net::async_write(
      socket_, net::buffer(chunk_),
      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); });
}

void HttpSession::on_written(beast::error_code ec) {
  write_pending_ = false;
  if (phase_ != Phase::kHandling) return;
  if (ec) {
    client_gone();
    return;
  }
  if (call_ && call_->streaming() && !stream_done_) {
    pump_outputs();
    return;
  }
  finish_request();
}

void HttpSession::finish_request() {
  log_request();
  if (counted_active_) {
    server_.request_finished();
    counted_active_ = false;
  }
  compile_ticket_ = {};
  compiling_job_.reset();
  call_.reset();
  service_.reset();
  // The handler that called this holds its own reference, so `this` outlives the reset.
  hold_.reset();
  if (close_after_write_ || !keep_alive_ || draining_) {
    linger_close();
    return;
  }
  begin_request();
}

void HttpSession::client_gone() {
  client_gone_ = true;
  if (call_) call_->abort();  // frees the request's KV blocks within one engine step
  close_socket();
}

void HttpSession::linger_close() {
  phase_ = Phase::kLingering;
  beast::error_code ec;
  socket_.shutdown(net::ip::tcp::socket::shutdown_send, ec);
  inbox_.clear();
  arm_deadline(Clock::now() + kLingerTimeout);
  start_read();
}

void HttpSession::close_socket() {
  if (phase_ == Phase::kClosed) return;
  if (phase_ == Phase::kHandling) log_request();
  phase_ = Phase::kClosed;
  compile_ticket_ = {};
  compiling_job_.reset();
  call_.reset();
  service_.reset();
  if (counted_active_) {
    server_.request_finished();
    counted_active_ = false;
  }
  beast::error_code ec;
  deadline_.cancel();
  socket_.close(ec);
  hold_.reset();
}

void HttpSession::log_request() const {
  if (!server_.config().log_requests) return;
  const double seconds = std::chrono::duration<double>(Clock::now() - started_at_).count();
  const std::string method = request_.method() == http::verb::unknown && request_.target().empty()
                                 ? "-"
                                 : std::string(request_.method_string());
  const std::string_view target = request_.target().empty() ? "-" : view(request_.target());
  const int status = client_gone_ && status_ == 0 ? 499 : status_;
  const char* note = client_gone_ ? " (client disconnected)" : "";
  if (call_) {
    spdlog::info("{} {} {} {} prompt_tokens={} completion_tokens={} {:.3f}s{}", call_->id(), method,
                 target, status, call_->num_prompt_tokens(), call_->num_completion_tokens(),
                 seconds, note);
  } else {
    spdlog::info("{} {} {} {:.3f}s{}", method, target, status, seconds, note);
  }
}

}  // namespace pagoda::server
