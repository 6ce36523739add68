// The scaled embedding gather's kernel source (Gemma 3), compiled as host C++ for the CPU
// emulation.
#include "kernels/embedding/scaled_embedding.cu"
