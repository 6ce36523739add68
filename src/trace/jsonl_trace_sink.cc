#include "trace/jsonl_trace_sink.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/rotating_file_sink.h>

#include <chrono>
#include <exception>
#include <utility>

namespace pagoda::trace {

namespace {

// How long events may wait for the writer when the queue is far from full.
constexpr std::chrono::milliseconds kWriteInterval{50};

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

StatusOr<std::unique_ptr<JsonlTraceSink>> JsonlTraceSink::open(JsonlTraceSinkOptions options) {
  if (options.max_queue_bytes == 0) return invalid_argument("trace queue bytes must be > 0");
  if (options.max_file_bytes == 0) return invalid_argument("trace file size must be > 0");
  spdlog::sink_ptr sink = options.sink_override;
  if (!sink) {
    if (options.path.empty()) return invalid_argument("--trace-file: empty path");
    try {
      sink = std::make_shared<spdlog::sinks::rotating_file_sink_st>(
          options.path, options.max_file_bytes, options.max_files);
    } catch (const std::exception& e) {
      return Status(StatusCode::kUnavailable,
                    "cannot open trace file " + options.path + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("pagoda-trace", std::move(sink));
  logger->set_pattern("%v");  // the JSON line and nothing else
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::off);
  return std::unique_ptr<JsonlTraceSink>(new JsonlTraceSink(std::move(options), std::move(logger)));
}

JsonlTraceSink::JsonlTraceSink(JsonlTraceSinkOptions options,
                               std::shared_ptr<spdlog::logger> logger)
    : options_(std::move(options)),
      logger_(std::move(logger)),
      start_(steady_seconds()),
      limiter_(options_.max_bytes_per_second) {
  writer_ = std::thread([this] { writer_loop(); });
}

JsonlTraceSink::~JsonlTraceSink() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_one();
  writer_.join();
  logger_->flush();
}

std::size_t JsonlTraceSink::footprint(const TraceEvent& event) {
  // Sizes, not capacities: the queued copy must count what the original counted.
  std::size_t bytes =
      sizeof(TraceEvent) + event.request_id.size() + event.text.size() + event.finish_reason.size();
  for (const TraceAlternative& a : event.alternatives) bytes += sizeof(a) + a.text.size();
  return bytes;
}

bool JsonlTraceSink::write(const TraceEvent& event) {
  const std::size_t bytes = footprint(event);
  {
    std::lock_guard lock(mutex_);
    if (stop_ || queued_bytes_ + bytes > options_.max_queue_bytes) {
      events_dropped_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    queued_bytes_ += bytes;
    queue_.push_back(event);
    // Waking the writer for every event would switch threads on the engine's core at every
    // token; it wakes on its own every kWriteInterval, or early once the queue fills up.
    if (queued_bytes_ <= options_.max_queue_bytes / 4) return true;
  }
  work_.notify_one();
  return true;
}

void JsonlTraceSink::writer_loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait_for(lock, kWriteInterval, [this] {
      return stop_ || flush_requested_ || queued_bytes_ > options_.max_queue_bytes / 4;
    });
    if (queue_.empty()) {
      if (stop_) break;
      flush_requested_ = false;
      idle_.notify_all();
      continue;
    }
    std::deque<TraceEvent> batch;
    batch.swap(queue_);
    writing_ = true;
    lock.unlock();
    std::size_t memory = 0;
    std::int64_t written = 0;
    std::int64_t dropped = 0;
    std::int64_t bytes = 0;
    for (const TraceEvent& event : batch) {
      memory += footprint(event);
      const std::string line = to_json_line(event);
      // The file gets the line and a newline (the logger's pattern adds it).
      if (!limiter_.allow(line.size() + 1, steady_seconds() - start_)) {
        ++dropped;
        continue;
      }
      logger_->log(spdlog::level::info, line);
      ++written;
      bytes += static_cast<std::int64_t>(line.size()) + 1;
    }
    logger_->flush();
    events_written_.fetch_add(written, std::memory_order_relaxed);
    events_dropped_.fetch_add(dropped, std::memory_order_relaxed);
    bytes_written_.fetch_add(bytes, std::memory_order_relaxed);
    lock.lock();
    queued_bytes_ -= memory;
    writing_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  writing_ = false;
  idle_.notify_all();
}

TraceSinkStats JsonlTraceSink::stats() const {
  return {events_written_.load(std::memory_order_relaxed),
          events_dropped_.load(std::memory_order_relaxed),
          bytes_written_.load(std::memory_order_relaxed)};
}

void JsonlTraceSink::flush() {
  std::unique_lock lock(mutex_);
  flush_requested_ = true;
  work_.notify_one();
  idle_.wait(lock, [this] { return (queue_.empty() && !writing_) || stop_; });
}

std::size_t JsonlTraceSink::queued_bytes() const {
  std::lock_guard lock(mutex_);
  return queued_bytes_;
}

}  // namespace pagoda::trace
