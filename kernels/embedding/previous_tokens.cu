#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/embedding/previous_tokens.h"

namespace pagoda::kernels {

namespace {

__global__ void gather_previous_tokens_kernel(std::int32_t* __restrict__ token_ids,
                                              const std::int32_t* __restrict__ pairs,
                                              const std::int32_t* __restrict__ previous,
                                              std::int64_t num_pairs) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < num_pairs) token_ids[pairs[2 * i]] = previous[pairs[2 * i + 1]];
}

}  // namespace

Status launch_gather_previous_tokens(const GatherPreviousTokensParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "gather_previous_tokens";
  PAGODA_KERNEL_REQUIRE(p.num_pairs >= 0 && p.num_pairs <= 0x7fffffff, kOp);
  if (p.num_pairs == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.token_ids != nullptr && p.pairs != nullptr && p.previous != nullptr, kOp);
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((p.num_pairs + kThreads - 1) / kThreads);
  return launch_kernel(gather_previous_tokens_kernel, blocks, kThreads, 0, stream,
                       "gather_previous_tokens_kernel", p.token_ids, p.pairs, p.previous,
                       p.num_pairs);
}

}  // namespace pagoda::kernels
