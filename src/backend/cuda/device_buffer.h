// Owning handles for device memory and pinned host memory. Everything the GPU path allocates goes
// through these, once, at start-up: a forward pass allocates nothing.
#pragma once

#include <cstddef>
#include <utility>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// Where a CudaMemory lives: device memory (cudaMalloc) or page-locked host memory
/// (cudaMallocHost, so host<->device copies can run asynchronously).
enum class MemoryKind { kDevice, kPinnedHost };

/// `bytes` of `Kind` memory, freed on destruction; move-only.
template <MemoryKind Kind>
class CudaMemory {
 public:
  CudaMemory() = default;
  /// RESOURCE_EXHAUSTED (or the CUDA error) when `bytes` more cannot be had.
  static StatusOr<CudaMemory> allocate(std::size_t bytes);
  ~CudaMemory() { release(); }
  CudaMemory(CudaMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  CudaMemory& operator=(CudaMemory&& other) noexcept {
    if (this != &other) {
      release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  CudaMemory(const CudaMemory&) = delete;
  CudaMemory& operator=(const CudaMemory&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void release();

  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = CudaMemory<MemoryKind::kDevice>;
using PinnedHostBuffer = CudaMemory<MemoryKind::kPinnedHost>;

extern template class CudaMemory<MemoryKind::kDevice>;
extern template class CudaMemory<MemoryKind::kPinnedHost>;

}  // namespace pagoda::cuda
