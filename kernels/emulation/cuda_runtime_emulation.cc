// The CUDA runtime calls that emulated kernel launchers and the GPU tests' memory helpers
// (tests/gpu/gpu_test_util.h, backend/cuda/device_buffer.h) make, on host memory: one device
// that "is" an H100 SXM (132 SMs, compute capability 9.0), device memory from aligned_alloc,
// copies as memcpy, every stream already synchronized (the emulation runs a launch to its end).
// No libcudart is linked into an emulated test.
#include <cuda_runtime_api.h>

#include "kernels/emulation/cuda_emulation.h"

#include <cstdlib>
#include <cstring>

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int) {
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = 227 << 10; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "CUDA emulation (H100-shaped)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 << 20;
  prop->sharedMemPerBlockOptin = 227 << 10;
  prop->totalGlobalMem = std::size_t{80} << 30;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  *total_bytes = std::size_t{80} << 30;
  *free_bytes = *total_bytes;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) {
  return cudaSuccess;
}

// 256-byte aligned, as cudaMalloc's.
cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  return cudaMalloc(p, bytes);
}
cudaError_t cudaFreeHost(void* p) {
  return cudaFree(p);
}
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t) {
  return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t) {
  return cudaMemset(dst, value, bytes);
}
cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  return cudaSuccess;
}
cudaError_t cudaGetLastError() {
  return cudaSuccess;
}
cudaError_t cudaPeekAtLastError() {
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t) {
  return "emulated";
}
const char* cudaGetErrorName(cudaError_t) {
  return "emulated";
}

}  // extern "C"

namespace pagoda::emulation {

void submit(cudaStream_t, std::function<void()> work) {
  work();
}

}  // namespace pagoda::emulation
