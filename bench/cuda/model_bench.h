// gpu_bench model: decode throughput of a whole model with random weights (--load-format
// dummy, optionally quantized at load), eager and replayed from CUDA graphs, with and without
// programmatic dependent launch.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "quant/load_time_quantization.h"

namespace pagoda::bench {

/// Prefills `context` tokens for each of `batch` sequences of `config_path`'s model, then times
/// `steps` decode steps per variant; one RESULT line per figure. `quantization` quantizes the
/// dummy linear layers at load (FP8 W8A8 / W4A16), `fp8_kv_cache` stores K/V as e4m3; the
/// batch-1 lines hold the bytes the weights stream per step (their device bytes, less the
/// embedding's) against the same-run copy bandwidth: the weight-bytes roofline fraction.
/// Returns the exit code.
int run_model(const std::string& config_path, cuda::ScalarType dtype,
              const std::vector<int>& batches, int context, int steps,
              quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone,
              bool fp8_kv_cache = false);

}  // namespace pagoda::bench
