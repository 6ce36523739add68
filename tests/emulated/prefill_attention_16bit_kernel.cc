// The bf16 and f16 instances of the CUDA-core paged prefill kernel, compiled as host C++ for the
// CPU emulation.
#include "kernels/attention/paged_prefill_bf16.cu"
#include "kernels/attention/paged_prefill_f16.cu"
