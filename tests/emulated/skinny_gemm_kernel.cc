// The 16-bit skinny GEMM's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/gemm/skinny_gemm.cu"
