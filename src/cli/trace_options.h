// The trace and reasoning flags `pagoda serve` and `pagoda bench` share, and how they become an
// engine configuration (the JSONL sink opened, the reasoning tags looked up).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/engine_config.h"
#include "pagoda/status.h"

namespace pagoda::cli {

/// --trace-* flags.
struct TraceOptions {
  std::string file;        ///< --trace-file: the JSONL file; empty: tracing off
  bool null_sink = false;  ///< --trace-null-sink: produce events, write nothing (cost studies)
  double sample_rate = 0.0;
  std::int64_t top_n = 5;
  double max_bytes_per_second = 0.0;
  std::int64_t max_queue_bytes = std::int64_t{8} << 20;
  std::int64_t max_file_bytes = std::int64_t{64} << 20;
  std::int64_t max_files = 4;

  /// Registers the flags on `app`.
  void add_to(CLI::App& app);
  /// Opens the sink and fills the trace fields of `config`. INVALID_ARGUMENT / UNAVAILABLE
  /// naming the flag.
  Status apply(engine::EngineConfig& config) const;
};

/// --reasoning-parser and --reasoning-effort-budgets.
struct ReasoningOptions {
  std::string parser;                            ///< empty: the model does not think
  std::string effort_budgets = "512,2048,8192";  ///< low,medium,high in tokens

  void add_to(CLI::App& app);
  /// Fills the reasoning fields of `config`; INVALID_ARGUMENT naming the flag.
  Status apply(engine::EngineConfig& config) const;
};

}  // namespace pagoda::cli
