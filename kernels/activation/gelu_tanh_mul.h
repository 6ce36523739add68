// GeGLU's gate (Gemma): gelu_tanh(gate) * up over the fused gate_up projection's output.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "kernels/activation/silu_mul.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
/// (PyTorch's gelu(approximate="tanh")), in fp32, rounded once. The layout is silu_mul's.
Status launch_gelu_tanh_mul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace pagoda::kernels
