// Pointwise pieces of the Llama block and the sampler: the SwiGLU gate, softmax, residual add.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// out = silu(gate) * up, silu(g) = g / (1 + exp(-g)) (the MLP's act_fn(gate_proj) * up_proj).
void silu_mul(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
              float* out /* [n] */);

/// Scalar oracle of silu_mul (double precision).
void silu_mul_reference(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
                        float* out /* [n] */);

/// In place, per row: x = exp(x - max(x)) / sum(exp(x - max(x))); -inf entries become 0.
void softmax(float* x /* [num_rows, n] */, std::int64_t num_rows, std::int64_t n);

/// Scalar oracle of softmax (double precision).
void softmax_reference(float* x /* [num_rows, n] */, std::int64_t num_rows, std::int64_t n);

/// y += x.
void add_inplace(float* y /* [n] */, const float* x /* [n] */, std::int64_t n);

}  // namespace pagoda::cpu
