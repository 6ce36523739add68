// The FP8 activation quantizer's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/quant/fp8_quantize.cu"
