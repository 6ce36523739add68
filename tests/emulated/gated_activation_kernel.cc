// The gated activations' kernel source (SiLU and tanh-GELU, with their fused FP8 output),
// compiled as host C++ for the CPU emulation.
#include "kernels/activation/gated_activation.cu"
