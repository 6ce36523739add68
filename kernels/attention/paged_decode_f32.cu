// The f32 instances of paged decode attention (one file per dtype keeps builds parallel).
#include "kernels/attention/paged_decode_kernel.cuh"

namespace pagoda::kernels::decode {

template Status run_paged_decode<float, float>(const PagedAttentionParams&, const DecodeSplitPlan&,
                                               const DecodeWorkspace&, bool, cudaStream_t);

}  // namespace pagoda::kernels::decode
