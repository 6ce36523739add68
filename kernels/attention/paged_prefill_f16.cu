// The f16 instances of paged prefill attention (one file per dtype keeps builds parallel).
#include "kernels/attention/paged_prefill_kernel.cuh"

namespace pagoda::kernels::prefill {

template Status run_paged_prefill<__half, __half>(const PagedAttentionParams&, std::int64_t,
                                                  cudaStream_t);

}  // namespace pagoda::kernels::prefill
