// gpu_bench model: decode throughput of a whole model with random weights (--load-format
// dummy), eager and replayed from CUDA graphs, with and without programmatic dependent launch.
#pragma once

#include <string>
#include <vector>

#include "backend/cuda/scalar_type.h"

namespace pagoda::bench {

/// Prefills `context` tokens for each of `batch` sequences of `config_path`'s model, then times
/// `steps` decode steps per variant; one RESULT line per figure. Returns the exit code.
int run_model(const std::string& config_path, cuda::ScalarType dtype,
              const std::vector<int>& batches, int context, int steps);

}  // namespace pagoda::bench
