// Turns a ConstraintSpec into a CompiledConstraint for one model's vocabulary, through xgrammar,
// with the costs bounded: the spec's text is checked first (constraint_limits.h), each compile
// runs on its own thread and the caller waits at most compile_timeout_seconds, at most
// max_running_compiles run at once, and results (and errors) are cached per spec in LRU order
// within cache_bytes. Concurrent requests for one new spec share one compile.
//
//   compile(spec) --cached--> CompiledConstraint (shared)
//        |  miss: limits ok?   --no--> INVALID_ARGUMENT naming the limit
//        |  a running slot within the timeout? --no--> UNAVAILABLE (busy)
//        v
//   thread: xgrammar compile --> cache (also when the caller gave up waiting)
//
// Thread-safe: the HTTP and gRPC threads call compile() directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pagoda/status.h"
#include "pagoda/tokenizer.h"
#include "structured/compiled_constraint.h"
#include "structured/constraint_limits.h"
#include "structured/constraint_spec.h"
#include "structured/token_vocabulary.h"

namespace pagoda::structured {

struct CompilerStats {
  std::int64_t cache_hits = 0;
  std::int64_t compiles = 0;  ///< Compiles started (cache misses that passed the limits).
  std::int64_t failed = 0;    ///< Specs refused: limits, grammar errors, timeouts.
  std::int64_t timeouts = 0;
  double compile_seconds = 0.0;  ///< Summed over finished compiles.
  std::size_t cache_bytes = 0;
  std::int64_t cached = 0;  ///< Entries in the cache (results and errors).
};

class ConstraintCompiler {
 public:
  /// For `tokenizer`'s vocabulary over `vocab_size` logits columns; a complete constraint lets
  /// only `stop_token_ids` through (EOS).
  ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size,
                     std::vector<std::int32_t> stop_token_ids, ConstraintLimits limits = {});
  ~ConstraintCompiler();

  /// The compiled constraint for `spec`; INVALID_ARGUMENT naming what is wrong with it (bad
  /// schema, regex or grammar, a limit, a compile over its time), UNAVAILABLE while too many
  /// other compiles run.
  StatusOr<std::shared_ptr<const CompiledConstraint>> compile(const ConstraintSpec& spec);

  CompilerStats stats() const;
  const ConstraintLimits& limits() const;
  const TokenVocabulary& vocabulary() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with compile threads that outlive a caller's wait
};

}  // namespace pagoda::structured
