// Per-head RMSNorm's kernel source, compiled as host C++ for the CPU emulation.
#include "kernels/norm/head_rms_norm.cu"
