// The f16 instances of paged decode attention (one file per dtype keeps builds parallel).
#include "kernels/attention/paged_decode_kernel.cuh"
#include "kernels/attention/paged_decode_mma_kernel.cuh"

namespace pagoda::kernels::decode {

template Status run_paged_decode<__half, __half>(const PagedAttentionParams&,
                                                 const DecodeSplitPlan&, const DecodeWorkspace&,
                                                 bool, cudaStream_t);

}  // namespace pagoda::kernels::decode

namespace pagoda::kernels::decode_mma {

template Status run_paged_decode_mma<__half, __half>(const PagedAttentionParams&,
                                                     const DecodeSplitPlan&, const DecodeWorkspace&,
                                                     cudaStream_t);

}  // namespace pagoda::kernels::decode_mma
