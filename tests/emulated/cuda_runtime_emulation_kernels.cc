// Kernels for the emulated runtime's own tests (cuda_runtime_emulation_test.cc), compiled as host
// C++ with the emulation header forced in.
#include "tests/emulated/cuda_runtime_emulation_kernels.h"

#include "kernels/common/async_copy.cuh"
#include "kernels/common/launch.cuh"

namespace pagoda::emulated_test {

namespace {

__global__ void add_one_kernel(float* x, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0f;
}

__global__ void sum_shared_kernel(int count, float* out) {
  PAGODA_DYNAMIC_SHARED(smem);
  float* values = reinterpret_cast<float*>(smem);
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
    values[i] = 1.0f;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int i = 0; i < count; ++i) sum += values[i];
    *out = sum;
  }
}

}  // namespace

Status add_one_with_block(float* x, int n, int threads, cudaStream_t stream) {
  return kernels::launch_kernel(add_one_kernel, dim3((n + threads - 1) / threads), dim3(threads), 0,
                                stream, "add_one", x, n);
}

Status add_one(float* x, int n, cudaStream_t stream) {
  return add_one_with_block(x, n, 128, stream);
}

Status sum_shared(std::size_t shared_bytes, float* out, cudaStream_t stream) {
  return kernels::launch_kernel(sum_shared_kernel, dim3(1), dim3(256), shared_bytes, stream,
                                "sum_shared", static_cast<int>(shared_bytes / sizeof(float)), out);
}

cudaError_t allow_shared(int bytes) {
  return cudaFuncSetAttribute(sum_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              bytes);
}

}  // namespace pagoda::emulated_test
