// Overlapped steps: a decode row whose input is the token its sequence sampled in the step still
// running when this one was planned. The host does not have that id yet; the device does, so it
// is copied from the previous step's sampled tokens into this step's token ids just before the
// embedding reads them.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "pagoda/status.h"

namespace pagoda::kernels {

struct GatherPreviousTokensParams {
  std::int32_t* token_ids = nullptr;       ///< [num_tokens] this step's input ids (device)
  const std::int32_t* pairs = nullptr;     ///< [num_pairs, 2]: (token row, previous row)
  const std::int32_t* previous = nullptr;  ///< the previous step's sampled ids, by its row
  std::int64_t num_pairs = 0;
};

/// token_ids[pairs[i][0]] = previous[pairs[i][1]] for every pair.
Status launch_gather_previous_tokens(const GatherPreviousTokensParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
