// The FP8 GEMM's scale epilogue kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/gemm/fp8_scale_epilogue.cu"
