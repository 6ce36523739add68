// The FP8-cache instances of paged decode attention (bf16 and f16 activations over e4m3 K/V).
#include <cuda_fp8.h>

#include "kernels/attention/paged_decode_kernel.cuh"

namespace pagoda::kernels::decode {

template Status run_paged_decode<__nv_bfloat16, __nv_fp8_e4m3>(const PagedAttentionParams&,
                                                               const DecodeSplitPlan&,
                                                               const DecodeWorkspace&, bool,
                                                               cudaStream_t);
template Status run_paged_decode<__half, __nv_fp8_e4m3>(const PagedAttentionParams&,
                                                        const DecodeSplitPlan&,
                                                        const DecodeWorkspace&, bool, cudaStream_t);

}  // namespace pagoda::kernels::decode
