// The W4A16 dequantizer's and gathers' kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/gemm/w4a16_dequantize.cu"
