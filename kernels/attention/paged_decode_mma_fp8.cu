// The FP8-cache instances of the tensor-core paged decode attention (bf16 and f16 activations
// over e4m3 K/V): converted to the dtype in shared memory, and the direct variant (fragments
// built from the codes, f16 mma).
#include <cuda_fp8.h>

#include "kernels/attention/paged_decode_mma_kernel.cuh"

namespace pagoda::kernels::decode_mma {

template Status run_paged_decode_mma<__nv_bfloat16, __nv_fp8_e4m3>(const PagedAttentionParams&,
                                                                   const DecodeSplitPlan&,
                                                                   const DecodeWorkspace&,
                                                                   cudaStream_t);
template Status run_paged_decode_mma<__half, __nv_fp8_e4m3>(const PagedAttentionParams&,
                                                            const DecodeSplitPlan&,
                                                            const DecodeWorkspace&, cudaStream_t);

template Status run_paged_decode_mma<__nv_bfloat16, __nv_fp8_e4m3, true>(
    const PagedAttentionParams&, const DecodeSplitPlan&, const DecodeWorkspace&, cudaStream_t);
template Status run_paged_decode_mma<__half, __nv_fp8_e4m3, true>(const PagedAttentionParams&,
                                                                  const DecodeSplitPlan&,
                                                                  const DecodeWorkspace&,
                                                                  cudaStream_t);

}  // namespace pagoda::kernels::decode_mma
