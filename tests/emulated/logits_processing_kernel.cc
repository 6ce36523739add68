// The sampler's logits processing kernels (mask, bias, penalties, token counts), compiled as
// host C++ for the CPU emulation.
#include "kernels/sampling/logits_processing.cu"
