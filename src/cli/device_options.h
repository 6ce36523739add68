// --device, --dtype, --gpu-memory-utilization and --enforce-eager: where `generate`, `serve` and
// `bench` run the model (also PAGODA_DEVICE etc. and the YAML config's keys on serve, as every
// flag).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "cli/quantization_options.h"
#include "engine/model_engine.h"
#include "pagoda/status.h"

namespace pagoda::cli {

/// The device flags, as given.
struct DeviceOptions {
  std::string device;          ///< "cuda" or "cpu"; empty: cuda when a GPU is visible
  std::string dtype = "bf16";  ///< CUDA weights, activations and KV cache: bf16, f16 or f32
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;  ///< CUDA: no CUDA graphs; accepted and unused on the CPU

  /// Registers the flags on `app`.
  void add_to(CLI::App& app);
  /// Resolves the device (engine::resolve_device) and fills `options` from these flags and
  /// `quantization`. --dtype and --gpu-memory-utilization are checked whichever device runs, so
  /// a bad value never passes unnoticed; on the CPU they are unused. INVALID_ARGUMENT /
  /// UNAVAILABLE / UNIMPLEMENTED naming the flag.
  Status apply(const QuantizationOptions& quantization, engine::ExecutorOptions& options) const;
  /// "cpu" or "cuda (bf16)": the device apply() chose, for startup lines and bench headers.
  std::string label(engine::Device chosen) const;
};

/// --step-time-target-ms on serve and bench, in seconds: the value given (>= 0; 0 turns it off),
/// else the default for `device`, kDefaultCpuStepTimeTargetMs on the CPU (whose steps take
/// seconds at the full token budget) and off on CUDA (a step there is milliseconds).
/// INVALID_ARGUMENT for a negative or non-finite value.
StatusOr<double> step_time_target_seconds(std::optional<double> ms, engine::Device device);
inline constexpr double kDefaultCpuStepTimeTargetMs = 250.0;
inline constexpr const char* kStepTimeTargetHelp =
    "Keep each engine step near this many milliseconds by sizing its token budget from the "
    "measured cost of a token (below --max-num-batched-tokens), so long prompts prefill in "
    "chunks beside the running requests; 0: off (default: 250 on the CPU, off on CUDA)";

}  // namespace pagoda::cli
