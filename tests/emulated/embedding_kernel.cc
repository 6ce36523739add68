// The embedding gather's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/embedding/embedding.cu"
