#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/norm/head_rms_norm.h"

namespace pagoda::kernels {

namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per (token, head) row: head_dim is at most a few hundred, so a warp's shuffles
// reduce it without shared memory. Each lane reads and later rewrites only its own elements,
// which is what makes the update in place safe.
template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    head_rms_norm_kernel(T* __restrict__ x, std::int64_t row_stride, const T* __restrict__ weight,
                         std::int64_t num_rows, std::int64_t num_heads, std::int64_t head_dim,
                         float eps) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= num_rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  T* v = x + (row / num_heads) * row_stride + (row % num_heads) * head_dim;
  float sum_sq = 0.0f;
  for (std::int64_t i = lane; i < head_dim; i += 32) {
    const float f = to_float(v[i]);
    sum_sq += f * f;
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    sum_sq += __shfl_xor_sync(0xffffffffu, sum_sq, offset);
  }
  const float inv_rms = rsqrtf(sum_sq / static_cast<float>(head_dim) + eps);
  for (std::int64_t i = lane; i < head_dim; i += 32) {
    v[i] = from_float<T>(to_float(weight[i]) * (to_float(v[i]) * inv_rms));
  }
}

}  // namespace

Status launch_head_rms_norm(const HeadRmsNormParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "head_rms_norm";
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.num_heads > 0 && p.head_dim > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.row_stride >= p.num_heads * p.head_dim, kOp);
  PAGODA_KERNEL_REQUIRE(p.eps >= 0.0f, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.x != nullptr && p.weight != nullptr, kOp);
  const std::int64_t num_rows = p.num_tokens * p.num_heads;
  const std::int64_t blocks = (num_rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  PAGODA_KERNEL_REQUIRE(blocks <= 0x7fffffff, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    return launch_pdl(head_rms_norm_kernel<T>, dim3(static_cast<unsigned>(blocks)),
                      dim3(kWarpsPerBlock * 32), 0, stream, "head_rms_norm_kernel",
                      static_cast<T*>(p.x), p.row_stride, static_cast<const T*>(p.weight), num_rows,
                      p.num_heads, p.head_dim, p.eps);
  });
}

}  // namespace pagoda::kernels
