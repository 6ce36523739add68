// RMSNorm as Llama defines it (and HF computes it): the mean of squares in fp32, then
// out = weight * (x * rsqrt(mean + eps)).
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// out[t] = weight * (x[t] * rsqrt(mean(x[t]^2) + eps)) for each of the num_tokens rows.
void rms_norm(const float* x /* [num_tokens, hidden] */, const float* weight /* [hidden] */,
              float eps, std::int64_t num_tokens, std::int64_t hidden,
              float* out /* [num_tokens, hidden] */);

/// residual += x, then out = rms_norm(residual): the pre-norm of the next sublayer fused with the
/// skip connection of the last.
void add_rms_norm(float* residual /* [num_tokens, hidden], in/out */,
                  const float* x /* [num_tokens, hidden] */, const float* weight /* [hidden] */,
                  float eps, std::int64_t num_tokens, std::int64_t hidden,
                  float* out /* [num_tokens, hidden] */);

/// Scalar oracle of rms_norm (mean of squares accumulated in double).
void rms_norm_reference(const float* x /* [num_tokens, hidden] */,
                        const float* weight /* [hidden] */, float eps, std::int64_t num_tokens,
                        std::int64_t hidden, float* out /* [num_tokens, hidden] */);

}  // namespace pagoda::cpu
