// The engine over a model file on the CPU: opens the model and its tokenizer, builds the CPU
// executor sized for the scheduler's budget, and starts an EngineClient. Used by `pagoda bench`
// and the real-model tests; `pagoda serve` will use it too.
#pragma once

#include <memory>
#include <string>

#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "pagoda/status.h"
#include "quant/load_time_quantization.h"

namespace pagoda::engine {

/// How to open a model for the CPU engine.
struct CpuEngineOptions {
  std::string model_path;  ///< A .gguf file or a Hugging Face folder.
  int num_threads = 0;     ///< 0: one per hardware thread.
  /// `--quantization`: quantize unquantized linear weights at load.
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
  EngineConfig engine;
};

/// An engine over `options.model_path`; NOT_FOUND / DATA_LOSS for unreadable models,
/// INVALID_ARGUMENT for settings the model or memory budget cannot meet.
StatusOr<std::unique_ptr<EngineClient>> open_cpu_engine(CpuEngineOptions options);

}  // namespace pagoda::engine
