// Bounds that keep compiling a client's constraint cheap: checked on the spec's text before the
// grammar engine sees it (size, nesting, repetition counts, enum and choice counts), then on the
// compile itself (time) and its result (bytes). Every refusal names the limit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pagoda/status.h"
#include "structured/constraint_spec.h"

namespace pagoda::structured {

struct ConstraintLimits {
  /// Longest schema, regex or grammar text, in bytes (and all choices together).
  std::size_t max_spec_bytes = 128 * 1024;
  /// Deepest nesting of a JSON schema document (objects and arrays).
  std::int64_t max_schema_depth = 32;
  /// Largest count a schema or regex may ask to repeat (maxLength, maxItems, {m,n}, ...): the
  /// grammar engine unrolls counted repetitions.
  std::int64_t max_repetition = 1024;
  /// Most values in one schema's enums, and most guided_choice entries.
  std::int64_t max_enum_values = 4096;
  /// Longest a request waits for its compile (queued and running) before it is refused.
  double compile_timeout_seconds = 10.0;
  /// Largest compiled constraint accepted, in bytes.
  std::size_t max_compiled_bytes = 64 * 1024 * 1024;
  /// Bytes of compiled constraints the cache keeps (least recently used go first).
  std::size_t cache_bytes = 256 * 1024 * 1024;
  /// Compile workers: compiles running at once (one past its timeout still counts until it
  /// ends).
  int max_running_compiles = 2;
  /// Distinct specs waiting for a worker; a new one past this is refused at once (503).
  int max_queued_compiles = 64;
  /// Threads one compile may use for its token-mask cache.
  int compile_threads = 2;
};

/// INVALID_ARGUMENT naming the first bound `spec` breaks (or its JSON schema being no JSON).
Status check_constraint_limits(const ConstraintSpec& spec, const ConstraintLimits& limits);

}  // namespace pagoda::structured
