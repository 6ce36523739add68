// The W4A16 GEMM's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/gemm/w4a16_gemm.cu"
