// Token sampling on the GPU without sorting the vocabulary: greedy argmax, or temperature, then
// top-k, top-p and min-p cut-offs found by radix select over the probabilities' bits, then one
// seeded draw (Philox) from what is kept. Same stage order and semantics as the CPU sampler
// (src/sampling/sampler_stages.cc), up to ties at a cut-off value.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "pagoda/status.h"

namespace pagoda::kernels {

struct TokenSamplingParams {
  const float* logits = nullptr;  ///< [num_rows, vocab_size]
  std::int64_t num_rows = 0;
  std::int64_t vocab_size = 0;
  const float* temperature = nullptr;      ///< [num_rows]; <= 0: greedy (argmax)
  const std::int32_t* top_k = nullptr;     ///< [num_rows]; <= 0 or >= vocab_size: off
  const float* top_p = nullptr;            ///< [num_rows]; >= 1: off
  const float* min_p = nullptr;            ///< [num_rows]; <= 0: off
  const std::uint64_t* seeds = nullptr;    ///< [num_rows], the request's seed
  const std::uint64_t* offsets = nullptr;  ///< [num_rows], the request's step: one draw each
  std::int32_t* out_tokens = nullptr;      ///< [num_rows]
};

/// One token per row. Greedy ties go to the lowest id, as in the CPU argmax. The same (seed,
/// offset) draws the same uniform number; the kept set can differ between runs only where float
/// sums in a different order land on the other side of a cut-off.
Status launch_sample_tokens(const TokenSamplingParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
