// The paged decode attention launcher (its dispatch, the split merge kernel) and the CUDA-core
// decode kernels' f32 and FP8-cache instances, compiled as host C++ for the CPU emulation. The
// launcher comes first: its extern template declarations must precede the instantiations.
#include "kernels/attention/paged_decode_attention.cu"
#include "kernels/attention/paged_decode_f32.cu"
#include "kernels/attention/paged_decode_fp8.cu"
