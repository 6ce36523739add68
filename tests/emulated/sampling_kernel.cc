// The sampler's token-drawing kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/sampling/sampling.cu"
