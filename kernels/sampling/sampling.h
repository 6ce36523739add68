// The token of each logits row on the GPU, by the rules of pagoda/step_sampling.h: a forced
// token, greedy argmax (lowest id on ties), or the Gumbel race over the tokens that top-k, top-p
// and min-p keep: argmax of s[v] + token_gumbel(draw_key(seed, position), v), s = l' / T, with
// the same counter-based noise as the CPU sampler (src/sampling/random_draw.h), so both pick the
// same token unless two scores tie within rounding. The cut-offs come from radix select over
// order-preserving keys, so ties at a cut-off are all kept, as on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling/sampling_layout.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct SampleTokensParams {
  const float* logits = nullptr;     ///< [num_rows, vocab_size] raw
  const float* processed = nullptr;  ///< [num_rows, vocab_size]; read for kRowProcessed rows
  const RowRecord* rows = nullptr;   ///< [num_rows]
  std::int64_t num_rows = 0;
  std::int64_t vocab_size = 0;
  std::int32_t* out_tokens = nullptr;  ///< [num_rows]; -1 for kRowReturnLogits rows
};

/// One token per row, one block per row. A top-k of at most 512 gathers its candidates in one
/// pass over the row; otherwise (or when the candidates overflow) each cut-off is a radix select
/// over the row.
Status launch_sample_tokens(const SampleTokensParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
