// The f16 instances of the tensor-core paged prefill attention (one file per dtype keeps builds
// parallel).
#include "kernels/attention/paged_prefill_mma_kernel.cuh"

namespace pagoda::kernels::prefill_mma {

template Status run_paged_prefill_mma<__half, __half>(const PagedAttentionParams&, std::int64_t,
                                                      int, int, cudaStream_t);

}  // namespace pagoda::kernels::prefill_mma
