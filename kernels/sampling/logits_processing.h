// Stages 1-4 of pagoda/step_sampling.h on the GPU, from the slots' device state
// (sampling_layout.h): the allowed mask, min_tokens bans, logit_bias and the penalties, written
// to a processed copy so the raw logits stay for logprobs and returned rows. And the penalty
// counts' updates from sampled or accepted tokens, on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sampling/sampling_layout.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct ProcessLogitsParams {
  const float* logits = nullptr;                 ///< [num_rows, vocab_size] raw
  float* processed = nullptr;                    ///< [num_rows, vocab_size]; kRowProcessed rows
  const RowRecord* rows = nullptr;               ///< [num_rows]
  const std::uint32_t* allowed_masks = nullptr;  ///< [num_masks, mask_words(vocab_size)]
  SlotArrays slots;
  std::int64_t num_rows = 0;
  std::int64_t vocab_size = 0;
};

/// Writes the processed logits of every kRowProcessed row (others are left alone): a dense pass
/// (mask, penalties) over all (row, vocab tile) pairs, then a sparse pass per kRowSparse row
/// (bias, which the penalties then scale, and min_tokens bans). The float operations are the
/// CPU sampler's, each rounded alone, so the results match it bit for bit.
Status launch_process_logits(const ProcessLogitsParams& params, cudaStream_t stream);

struct CountTokensParams {
  const RowRecord* rows = nullptr;       ///< [num_rows]
  const std::int32_t* tokens = nullptr;  ///< [num_rows]
  SlotArrays slots;
  std::int64_t num_rows = 0;
  std::int64_t vocab_size = 0;
};

/// counts[slot's penalty row][token] += 1 for every kRowCountToken row.
Status launch_count_tokens(const CountTokensParams& params, cudaStream_t stream);

struct AddTokenCountsParams {
  std::int32_t* counts = nullptr;        ///< [vocab_size]: one slot's penalty row
  const std::int32_t* tokens = nullptr;  ///< [num_tokens], each in [0, vocab_size)
  std::int64_t num_tokens = 0;
  std::int64_t vocab_size = 0;
};

/// counts[token] += 1 for each of `tokens` (accepted drafts).
Status launch_add_token_counts(const AddTokenCountsParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
