// Turns a ConstraintSpec into a CompiledConstraint for one model's vocabulary, through xgrammar,
// off the caller's thread and with the costs bounded: the spec's text is checked first
// (constraint_limits.h); compiles run on a fixed pool of max_running_compiles workers behind a
// queue of at most max_queued_compiles specs; each caller hears back within
// compile_timeout_seconds; results (and errors) are cached per spec in LRU order within
// cache_bytes. Concurrent requests for one new spec share one compile.
//
//   compile_async(spec, done) --cached / limits broken / queue full--> done(result) at once
//        |  miss: join the spec's compile, or queue a new one
//        v
//   queue --worker free--> worker: xgrammar compile --> cache --> done(result) per waiter
//   deadline thread: a waiter past its time --> done(400 "took longer", or 503 while queued)
//
// A compile cannot be stopped midway: one past its callers' time runs on and is cached. A
// queued compile whose callers all left (tickets cancelled) never runs.
//
// Thread-safe: the HTTP and gRPC threads call compile_async() and never wait.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "pagoda/status.h"
#include "pagoda/tokenizer.h"
#include "structured/compiled_constraint.h"
#include "structured/constraint_limits.h"
#include "structured/constraint_spec.h"
#include "structured/token_vocabulary.h"

namespace pagoda::structured {

using CompileResult = StatusOr<std::shared_ptr<const CompiledConstraint>>;
/// Called once with a compile's outcome: on the caller's thread (a cache hit, a refusal), a
/// compile worker or the deadline thread. It must be quick and must not call back into the
/// compiler's waits (compile()).
using CompileCallback = std::function<void(CompileResult)>;

/// One caller's wait on a compile. Cancelling or destroying it means its callback is not called
/// from then on (a call already under way on another thread may still finish: callbacks should
/// hold weak references to what they touch).
class CompileTicket {
 public:
  CompileTicket() = default;
  explicit CompileTicket(std::function<void()> cancel) : cancel_(std::move(cancel)) {}
  CompileTicket(CompileTicket&& other) noexcept : cancel_(std::exchange(other.cancel_, {})) {}
  CompileTicket& operator=(CompileTicket&& other) noexcept {
    if (this != &other) {
      cancel();
      cancel_ = std::exchange(other.cancel_, {});
    }
    return *this;
  }
  CompileTicket(const CompileTicket&) = delete;
  CompileTicket& operator=(const CompileTicket&) = delete;
  ~CompileTicket() { cancel(); }

  void cancel() {
    if (cancel_) std::exchange(cancel_, {})();
  }

 private:
  std::function<void()> cancel_;
};

/// How one caller's wait on a compile ended (a cache hit is not a wait). The order is the
/// metric labels' order.
enum class CompileOutcome {
  kOk,         ///< Compiled: the request goes on.
  kInvalid,    ///< 400: a limit, a bad schema, regex or grammar, too large once compiled.
  kTimeout,    ///< 400: the compile ran past compile_timeout_seconds.
  kQueueFull,  ///< 503: no room in the queue, or no worker free within the time.
  kCancelled,  ///< The caller left first (its ticket was cancelled).
  kShutdown,   ///< 503: the compiler went first.
};
inline constexpr std::size_t kNumCompileOutcomes = 6;
/// "ok", "invalid", "timeout", "queue_full", "cancelled", "shutdown".
const char* compile_outcome_name(CompileOutcome outcome);

/// Upper bounds (seconds) of the compile-time histogram's buckets; +Inf follows the last.
inline constexpr std::array<double, 14> kCompileTimeBuckets = {
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0};

/// Counters since the compiler was made, and its queue now. Every compile_async call is a
/// cache query; one the cache did not answer is a wait that starts and later finishes under
/// exactly one outcome, so waits_started - sum(waits_finished) callers are waiting now.
struct CompilerStats {
  std::int64_t cache_queries = 0;  ///< compile_async calls.
  std::int64_t cache_hits = 0;     ///< Calls answered from the cache (results and errors).
  std::int64_t waits_started = 0;  ///< Calls the cache did not answer.
  std::array<std::int64_t, kNumCompileOutcomes> waits_finished{};  ///< By CompileOutcome.
  std::int64_t compiles = 0;          ///< Compiles handed to a worker (one per spec, however
                                      ///< many callers share it).
  std::int64_t compiles_dropped = 0;  ///< Queued compiles dropped because every caller left.
  /// Finished compiles' durations: per bucket of kCompileTimeBuckets (not cumulative; the last
  /// is +Inf), their sum and count.
  std::array<std::int64_t, kCompileTimeBuckets.size() + 1> compile_time_buckets{};
  double compile_seconds = 0.0;
  std::int64_t compiles_finished = 0;
  std::int64_t queued = 0;   ///< Compiles waiting for a worker now.
  std::int64_t running = 0;  ///< Compiles on a worker now.
  std::size_t cache_bytes = 0;
  std::int64_t cached = 0;  ///< Entries in the cache (results and errors).

  std::int64_t finished(CompileOutcome outcome) const {
    return waits_finished[static_cast<std::size_t>(outcome)];
  }
};

class ConstraintCompiler {
 public:
  /// For `tokenizer`'s vocabulary over `vocab_size` logits columns; a complete constraint lets
  /// only `stop_token_ids` through (EOS).
  ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size,
                     std::vector<std::int32_t> stop_token_ids, ConstraintLimits limits = {});
  ~ConstraintCompiler();

  /// Starts compiling `spec` (or joins its compile in flight) and calls `done` once with the
  /// compiled constraint or INVALID_ARGUMENT naming what is wrong with it (bad schema, regex or
  /// grammar, a limit, a compile over its time); UNAVAILABLE when the queue is full, a queued
  /// compile finds no worker within the time, or the compiler is destroyed first.
  CompileTicket compile_async(const ConstraintSpec& spec, CompileCallback done);
  /// compile_async, waiting on the calling thread for the result (tests, offline tools).
  CompileResult compile(const ConstraintSpec& spec);

  CompilerStats stats() const;
  const ConstraintLimits& limits() const;
  const TokenVocabulary& vocabulary() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the worker threads, which end after it
};

}  // namespace pagoda::structured
