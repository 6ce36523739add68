// Where trace events go. The engine calls write() on its own thread, inside a step, so a sink
// must never block: it queues or drops, and counts what it dropped.
#pragma once

#include <cstdint>

#include "trace/trace_event.h"

namespace pagoda::trace {

/// Counters of one sink (exported on /metrics).
struct TraceSinkStats {
  std::int64_t events_written = 0;
  std::int64_t events_dropped = 0;  ///< Over the byte rate, the queue's memory, or on close.
  std::int64_t bytes_written = 0;
};

/// Receives the engine's trace events. Thread-safe.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  /// Takes one event without blocking; false when it was dropped.
  virtual bool write(const TraceEvent& event) = 0;
  /// Counters so far.
  virtual TraceSinkStats stats() const = 0;
  /// Waits until every event taken so far is written (tests, shutdown).
  virtual void flush() {}
};

/// Accepts and discards everything: tracing's cost without any I/O (benchmarks, tests).
class NullTraceSink final : public TraceSink {
 public:
  bool write(const TraceEvent& event) override { return true; }
  TraceSinkStats stats() const override { return {}; }
};

}  // namespace pagoda::trace
