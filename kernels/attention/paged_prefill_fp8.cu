// The FP8-cache instances of the CUDA-core paged prefill attention (bf16 and f16 activations over
// e4m3 K/V): what an FP8 cache's prefills run until the tensor-core kernel reads FP8.
#include <cuda_fp8.h>

#include "kernels/attention/paged_prefill_kernel.cuh"

namespace pagoda::kernels::prefill {

template Status run_paged_prefill<__nv_bfloat16, __nv_fp8_e4m3>(const PagedAttentionParams&,
                                                                std::int64_t, cudaStream_t);
template Status run_paged_prefill<__half, __nv_fp8_e4m3>(const PagedAttentionParams&, std::int64_t,
                                                         cudaStream_t);

}  // namespace pagoda::kernels::prefill
