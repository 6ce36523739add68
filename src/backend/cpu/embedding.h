// Token embedding lookup: rows of the (possibly quantized) embedding table, decoded to fp32.
#pragma once

#include <cstdint>

#include "backend/cpu/tensor_view.h"

namespace pagoda::cpu {

/// out[t] = table[token_ids[t]] decoded to fp32, bit-identical to the reference dequantizer.
void embedding(const TensorView& table /* [vocab, hidden] */,
               const std::int32_t* token_ids /* [num_tokens] */, std::int64_t num_tokens,
               float* out /* [num_tokens, hidden] */);

/// Oracle: each row through the reference dequantizer.
void embedding_reference(const TensorView& table /* [vocab, hidden] */,
                         const std::int32_t* token_ids /* [num_tokens] */, std::int64_t num_tokens,
                         float* out /* [num_tokens, hidden] */);

}  // namespace pagoda::cpu
