// The bf16 and f16 instances of both paged decode kernels (CUDA cores and tensor cores over a
// 16-bit cache), compiled as host C++ for the CPU emulation.
#include "kernels/attention/paged_decode_bf16.cu"
#include "kernels/attention/paged_decode_f16.cu"
