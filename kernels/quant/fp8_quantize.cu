#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/quant/fp8_quantize.h"
#include "kernels/quant/fp8_row_scale.cuh"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 256;

// One block per row: the row's amax, then its codes (the second pass reads the row back from
// L1/L2, not HBM).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    fp8_quantize_rows_kernel(const T* __restrict__ x, std::uint8_t* __restrict__ codes,
                             float* __restrict__ scales, std::int64_t cols) {
  pdl_launch_dependents();
  pdl_wait();
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * cols;
  float amax = 0.0f;
  for (std::int64_t i = threadIdx.x; i < cols; i += kThreads) {
    amax = fmaxf(amax, fabsf(to_float(x[row + i])));
  }
  const Fp8RowScale s = fp8_row_scale(block_max(amax));
  for (std::int64_t i = threadIdx.x; i < cols; i += kThreads) {
    codes[row + i] = fp8_code(to_float(x[row + i]), s.inverse);
  }
  if (threadIdx.x == 0) scales[blockIdx.x] = s.scale;
}

}  // namespace

Status launch_fp8_quantize_rows(const Fp8QuantizeParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "fp8_quantize_rows";
  PAGODA_KERNEL_REQUIRE(p.rows >= 0 && p.rows <= 0x7fffffff && p.cols > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.dtype != cuda::ScalarType::kF32, kOp);
  if (p.rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.x != nullptr && p.codes != nullptr && p.scales != nullptr, kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    return launch_pdl(fp8_quantize_rows_kernel<T>, dim3(static_cast<unsigned>(p.rows)),
                      dim3(kThreads), 0, stream, "fp8_quantize_rows_kernel",
                      static_cast<const T*>(p.x), p.codes, p.scales, p.cols);
  });
}

}  // namespace pagoda::kernels
