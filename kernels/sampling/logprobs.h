// Logprobs on the GPU as the CPU sampler returns them (src/sampling/logprobs.h): log_softmax of
// the RAW logits (vLLM's raw_logprobs), the chosen token's value and rank (1 + the tokens with a
// strictly larger logit), and the num_logprobs best tokens, descending, ties by ascending id.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling/sampling_layout.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct LogprobsParams {
  const float* logits = nullptr;         ///< [num_rows, vocab_size] raw
  const RowRecord* rows = nullptr;       ///< [num_rows]; rows with logprobs_index >= 0 are done
  const std::int32_t* tokens = nullptr;  ///< [num_rows] the chosen tokens
  std::int64_t num_rows = 0;
  std::int64_t vocab_size = 0;
  LogprobsRecord* out = nullptr;  ///< [max logprobs_index + 1]
};

/// One block per row: one pass for the normalizer, the rank and each thread's maximum; then the
/// top tokens from the candidates at or above the num_logprobs-th largest thread maximum (exact
/// radix select over the row when too many tie there).
Status launch_compute_logprobs(const LogprobsParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
