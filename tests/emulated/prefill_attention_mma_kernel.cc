// The tensor-core paged prefill kernel over 16-bit caches (bf16 and f16), compiled as host C++
// for the CPU emulation.
#include "kernels/attention/paged_prefill_mma_bf16.cu"
#include "kernels/attention/paged_prefill_mma_f16.cu"
