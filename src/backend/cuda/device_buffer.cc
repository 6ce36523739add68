#include "backend/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include <string>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

template <MemoryKind Kind>
StatusOr<CudaMemory<Kind>> CudaMemory<Kind>::allocate(std::size_t bytes) {
  CudaMemory memory;
  if (bytes == 0) return memory;
  constexpr bool device = Kind == MemoryKind::kDevice;
  const cudaError_t error =
      device ? cudaMalloc(&memory.data_, bytes) : cudaMallocHost(&memory.data_, bytes);
  if (error != cudaSuccess) {
    memory.data_ = nullptr;
    return cuda_status(error, std::string(device ? "cudaMalloc" : "cudaMallocHost") + " of " +
                                  std::to_string(bytes) + " bytes");
  }
  memory.bytes_ = bytes;
  return memory;
}

template <MemoryKind Kind>
void CudaMemory<Kind>::release() {
  if (data_ == nullptr) return;
  if constexpr (Kind == MemoryKind::kDevice) {
    cudaFree(data_);
  } else {
    cudaFreeHost(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
}

template class CudaMemory<MemoryKind::kDevice>;
template class CudaMemory<MemoryKind::kPinnedHost>;

}  // namespace pagoda::cuda
