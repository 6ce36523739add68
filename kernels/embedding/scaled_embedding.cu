#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/embedding/scaled_embedding.h"

namespace pagoda::kernels {

namespace {

// One block per token; threads stride over the row.
template <typename T>
__global__ void scaled_embedding_kernel(const T* __restrict__ table,
                                        const std::int32_t* __restrict__ ids, T* __restrict__ out,
                                        std::int64_t num_table_rows, std::int64_t hidden,
                                        float scale) {
  const std::int64_t token = blockIdx.x;
  const std::int32_t id = ids[token];
  const bool valid = id >= 0 && id < num_table_rows;
  const T* src = table + static_cast<std::int64_t>(valid ? id : 0) * hidden;
  T* dst = out + token * hidden;
  for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    dst[i] = from_float<T>(valid ? to_float(src[i]) * scale : 0.0f);
  }
}

}  // namespace

Status launch_scaled_embedding(const EmbeddingParams& p, float scale, cudaStream_t stream) {
  constexpr const char* kOp = "scaled_embedding";
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.hidden > 0 && p.num_table_rows > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.num_tokens <= 0x7fffffff, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.table != nullptr && p.ids != nullptr && p.out != nullptr, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    return launch_kernel(scaled_embedding_kernel<T>, static_cast<unsigned>(p.num_tokens), 128, 0,
                         stream, "scaled_embedding_kernel", static_cast<const T*>(p.table), p.ids,
                         static_cast<T*>(p.out), p.num_table_rows, p.hidden, scale);
  });
}

}  // namespace pagoda::kernels
