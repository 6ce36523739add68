// GeGLU's gate: gelu_pytorch_tanh(gate) * up (Gemma's MLP, hidden_activation gelu_pytorch_tanh).
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))),
/// computed as g / (1 + exp(-2 sqrt(2/pi) (g + 0.044715 g^3))), the same function.
void gelu_tanh_mul(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
                   float* out /* [n] */);

/// Scalar oracle of gelu_tanh_mul: PyTorch's tanh formula in double precision.
void gelu_tanh_mul_reference(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
                             float* out /* [n] */);

namespace avx2 {

/// gelu_tanh_mul with AVX2 + FMA. Call only when cpu_has_avx2().
void gelu_tanh_mul(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
                   float* out /* [n] */);

}  // namespace avx2

}  // namespace pagoda::cpu
