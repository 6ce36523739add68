// The sampler's logprobs kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/sampling/logprobs.cu"
