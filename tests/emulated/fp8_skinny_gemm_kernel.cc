// The FP8 skinny GEMM's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/gemm/fp8_skinny_gemm.cu"
