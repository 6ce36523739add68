// --speculative-config, shared by `pagoda serve`, `pagoda generate` and `pagoda bench offline`
// (also PAGODA_SPECULATIVE_CONFIG and the YAML config's speculative-config key, as every flag).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/engine_config.h"
#include "pagoda/status.h"

namespace pagoda::cli {

/// The JSON text of --speculative-config (vLLM's keys; see src/spec/speculative_config.h).
struct SpeculativeOptions {
  std::string json;  ///< empty: speculation off

  /// Registers the flag on `app`.
  void add_to(CLI::App& app);
  /// Whether the flag was given.
  bool enabled() const { return !json.empty(); }
  /// Parses the JSON into `config.speculative`; INVALID_ARGUMENT naming the flag and the key.
  Status apply(engine::EngineConfig& config) const;
};

}  // namespace pagoda::cli
