// AVX2 + FMA row kernels behind rms_norm.h and activation.h. Call only when cpu_has_avx2().
#pragma once

#include <cstdint>

namespace pagoda::cpu::avx2 {

/// Sum of x[i]^2 in fp32, eight lanes and two accumulators.
float sum_squares(const float* x /* [n] */, std::int64_t n);

/// out[i] = weight[i] * (x[i] * scale).
void scale_by_weight(const float* x /* [n] */, float scale, const float* weight /* [n] */,
                     std::int64_t n, float* out /* [n] */);

/// out[i] = silu(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i].
void silu_mul(const float* gate /* [n] */, const float* up /* [n] */, std::int64_t n,
              float* out /* [n] */);

/// x[i] = exp(x[i] - shift) (0 where x[i] is -inf), returning the sum of the new values.
float exp_shifted(float* x /* [n] */, std::int64_t n, float shift);

/// Maximum of x; -inf for n == 0.
float max_value(const float* x /* [n] */, std::int64_t n);

}  // namespace pagoda::cpu::avx2
