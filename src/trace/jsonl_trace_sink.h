// The trace file: one JSON object per line, written by spdlog's rotating file sink on a writer
// thread of its own, behind a queue bounded in bytes.
//
//   engine thread                      writer thread
//   write(event) --> queue of events --> to_json_line --> byte rate? --> spdlog rotating file
//                    (<= max_queue_bytes                  | over it: dropped, counted
//                     of event memory; past it the new event is dropped, counted)
//
// Serializing on the writer keeps JSON's cost off the engine thread, which only copies the
// event. The queue is bounded by the events' memory (estimated per event), the byte rate by the
// bytes actually written.
// Why not spdlog's async_logger: its queue is bounded in messages rather than bytes, and its only
// non-blocking overflow policy (spdlog 1.10, Debian 12) overwrites the oldest message, silently.
// Here the newest event is refused instead, and the engine learns it was dropped.
#pragma once

#include <spdlog/sinks/sink.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "pagoda/status.h"
#include "trace/byte_rate_limiter.h"
#include "trace/trace_sink.h"

namespace spdlog {
class logger;
}

namespace pagoda::trace {

/// Settings of the trace file (`--trace-file` and friends).
struct JsonlTraceSinkOptions {
  /// The file; rotated to path.1, path.2, ... (spdlog's naming keeps the extension last).
  std::string path;
  /// Rotate when the file would pass this size.
  std::size_t max_file_bytes = std::size_t{64} << 20;
  /// Rotated files kept besides the current one.
  std::size_t max_files = 4;
  /// Memory of events waiting for the writer; past it new events are dropped.
  std::size_t max_queue_bytes = std::size_t{8} << 20;
  /// Average bytes per second accepted (bursts of one second); <= 0: unlimited.
  double max_bytes_per_second = 0.0;
  /// Tests: write to this spdlog sink instead of a file (`path` is then ignored).
  spdlog::sink_ptr sink_override;
};

class JsonlTraceSink final : public TraceSink {
 public:
  /// Opens (appends to) the file and starts the writer. INVALID_ARGUMENT for bad limits,
  /// UNAVAILABLE when the file cannot be opened.
  static StatusOr<std::unique_ptr<JsonlTraceSink>> open(JsonlTraceSinkOptions options);
  /// Writes what is queued, then stops the writer.
  ~JsonlTraceSink() override;

  bool write(const TraceEvent& event) override;
  TraceSinkStats stats() const override;
  void flush() override;

  /// Memory held by queued events not yet written.
  std::size_t queued_bytes() const;

  /// The memory one queued event holds (its strings and alternatives included).
  static std::size_t footprint(const TraceEvent& event);

 private:
  JsonlTraceSink(JsonlTraceSinkOptions options, std::shared_ptr<spdlog::logger> logger);
  void writer_loop();

  const JsonlTraceSinkOptions options_;
  std::shared_ptr<spdlog::logger> logger_;
  const double start_;  // steady clock origin for the rate limiter

  mutable std::mutex mutex_;  // guards the queue, the limiter and the flags below
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<TraceEvent> queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool flush_requested_ = false;
  bool stop_ = false;

  ByteRateLimiter limiter_;  // the writer thread's alone

  std::atomic<std::int64_t> events_written_{0};
  std::atomic<std::int64_t> events_dropped_{0};
  std::atomic<std::int64_t> bytes_written_{0};
  std::thread writer_;
};

}  // namespace pagoda::trace
