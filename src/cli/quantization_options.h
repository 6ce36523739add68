// The weight and KV-cache precision flags `generate`, `serve`, `bench` and `perplexity` share.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/kv_cache_view.h"
#include "pagoda/status.h"
#include "quant/load_time_quantization.h"

namespace pagoda::cli {

/// What the CPU executor runs with, from the flags.
struct CpuPrecision {
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
  cpu::KvDtype kv_cache_dtype = cpu::KvDtype::kF32;
  /// --cpu-activations; nullopt: auto (the environment's, else int16).
  std::optional<cpu::CpuActivations> activations;

  /// Sets the process-wide activation rounding (cpu::set_cpu_activations) where one was asked
  /// for; call before the executor loads its weights.
  void apply_activations() const;
};

/// --quantization, --kv-cache-dtype (vLLM's names; fp16 as llama.cpp's f16 cache) and
/// --cpu-activations.
struct QuantizationOptions {
  std::string quantization = "none";     ///< none, fp8, int4: quantize weights at load
  std::string kv_cache_dtype = "auto";   ///< auto (fp32 on the CPU), fp16 (CPU), fp8 (CUDA)
  std::string cpu_activations = "auto";  ///< auto, int16, int8 or fp32

  /// Registers the flags on `app`.
  void add_to(CLI::App& app);
  /// The weight quantization and KV cache type for the CPU executor; INVALID_ARGUMENT /
  /// UNIMPLEMENTED naming the flag for values the CPU does not run.
  StatusOr<CpuPrecision> for_cpu() const;
};

}  // namespace pagoda::cli
