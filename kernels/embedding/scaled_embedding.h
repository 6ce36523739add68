// The embedding lookup scaled by a constant (Gemma's embed_tokens(ids) * sqrt(hidden)).
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/embedding/embedding.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// out[t] = table[ids[t]] * scale, the product in fp32 and rounded once to dtype (transformers
/// multiplies by the scale already rounded to the activation dtype: the caller rounds it).
/// Out-of-range ids give zero rows, as launch_embedding.
Status launch_scaled_embedding(const EmbeddingParams& params, float scale, cudaStream_t stream);

}  // namespace pagoda::kernels
