#include "backend/cuda/device_buffer.h"

#include <cuda_runtime_api.h>

#include <string>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

StatusOr<DeviceBuffer> DeviceBuffer::allocate(std::size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t error = cudaMalloc(&buffer.data_, bytes);
  if (error != cudaSuccess) {
    buffer.data_ = nullptr;
    return cuda_status(error, "cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

StatusOr<PinnedHostBuffer> PinnedHostBuffer::allocate(std::size_t bytes) {
  PinnedHostBuffer buffer;
  if (bytes == 0) return buffer;
  const cudaError_t error = cudaMallocHost(&buffer.data_, bytes);
  if (error != cudaSuccess) {
    buffer.data_ = nullptr;
    return cuda_status(error, "cudaMallocHost of " + std::to_string(bytes) + " bytes");
  }
  buffer.bytes_ = bytes;
  return buffer;
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

PinnedHostBuffer& PinnedHostBuffer::operator=(PinnedHostBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeHost(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace pagoda::cuda
