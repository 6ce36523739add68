// The tensor-core paged prefill kernel over an FP8 cache, compiled as host C++ for the CPU
// emulation.
#include "kernels/attention/paged_prefill_mma_fp8.cu"
