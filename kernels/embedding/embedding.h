// Row gather: the token embedding lookup, and the same copy picks the hidden rows that need
// logits (logits_indices) before the LM head.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct EmbeddingParams {
  const void* table = nullptr;        ///< [num_table_rows, hidden], dtype
  const std::int32_t* ids = nullptr;  ///< [num_tokens], device; each in [0, num_table_rows)
  void* out = nullptr;                ///< [num_tokens, hidden], dtype
  std::int64_t num_table_rows = 0;
  std::int64_t num_tokens = 0;
  std::int64_t hidden = 0;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
};

/// out[t] = table[ids[t]]. Ids are checked on the host before they reach the device; an id out
/// of range still never reads outside the table: its row is written as zeros.
Status launch_embedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
