// The paged prefill attention launcher (its dispatch between the kernels) and the CUDA-core
// prefill kernel's f32 and FP8-cache instances, compiled as host C++ for the CPU emulation. The
// launcher comes first: its extern template declarations must precede the instantiations.
#include "kernels/attention/paged_prefill_attention.cu"
#include "kernels/attention/paged_prefill_f32.cu"
#include "kernels/attention/paged_prefill_fp8.cu"
