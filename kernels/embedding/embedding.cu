#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/embedding/embedding.h"

namespace pagoda::kernels {

namespace {

// One block per token; threads stride over the row in 16-byte packs (kVector) or elements.
template <typename T, bool kVector>
__global__ void embedding_kernel(const T* __restrict__ table, const std::int32_t* __restrict__ ids,
                                 T* __restrict__ out, std::int64_t num_table_rows,
                                 std::int64_t hidden) {
  const std::int64_t token = blockIdx.x;
  const std::int32_t id = ids[token];
  const bool valid = id >= 0 && id < num_table_rows;
  const T* src = table + static_cast<std::int64_t>(valid ? id : 0) * hidden;
  T* dst = out + token * hidden;
  if constexpr (kVector) {
    constexpr int kPack = Pack<T>::kSize;
    for (std::int64_t i = threadIdx.x * kPack; i < hidden; i += blockDim.x * kPack) {
      Pack<T> pack = load_pack(src + i);
      if (!valid) {
        for (int j = 0; j < kPack; ++j) pack.v[j] = from_float<T>(0.0f);
      }
      store_pack(dst + i, pack);
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      dst[i] = valid ? src[i] : from_float<T>(0.0f);
    }
  }
}

}  // namespace

Status launch_embedding(const EmbeddingParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "embedding";
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.hidden > 0 && p.num_table_rows > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.num_tokens <= 0x7fffffff, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.table != nullptr && p.ids != nullptr && p.out != nullptr, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    const bool vector =
        p.hidden % Pack<T>::kSize == 0 && is_aligned16(p.table) && is_aligned16(p.out);
    const auto* table = static_cast<const T*>(p.table);
    auto* out = static_cast<T*>(p.out);
    const dim3 grid(static_cast<unsigned>(p.num_tokens));
    return launch_kernel(vector ? embedding_kernel<T, true> : embedding_kernel<T, false>, grid, 128,
                         0, stream, "embedding_kernel", table, p.ids, out, p.num_table_rows,
                         p.hidden);
  });
}

}  // namespace pagoda::kernels
