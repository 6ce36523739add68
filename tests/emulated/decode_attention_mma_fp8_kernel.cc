// The tensor-core paged decode kernel over an FP8 cache (converted tiles and the direct
// variant), compiled as host C++ for the CPU emulation.
#include "kernels/attention/paged_decode_mma_fp8.cu"
