// The weight and KV-cache precision flags `generate`, `serve`, `bench` and `perplexity` share.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "pagoda/status.h"
#include "quant/load_time_quantization.h"

namespace pagoda::cli {

/// --quantization and --kv-cache-dtype (vLLM's names).
struct QuantizationOptions {
  std::string quantization = "none";    ///< none, fp8, int4: quantize weights at load
  std::string kv_cache_dtype = "auto";  ///< auto (fp32 on the CPU) or fp8 (GPU only)

  /// Registers the flags on `app`.
  void add_to(CLI::App& app);
  /// The load-time quantization for the CPU executor; INVALID_ARGUMENT / UNIMPLEMENTED naming
  /// the flag for values the CPU does not run.
  StatusOr<quant::LoadTimeQuantization> for_cpu() const;
};

}  // namespace pagoda::cli
