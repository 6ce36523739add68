// RMSNorm's kernel source (with its fused FP8 output), compiled as host C++ for the CPU
// emulation.
#include "kernels/norm/rms_norm.cu"
