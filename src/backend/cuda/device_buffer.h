// Owning handles for device memory and pinned host memory. Everything the GPU path allocates goes
// through these, once, at start-up: a forward pass allocates nothing.
#pragma once

#include <cstddef>
#include <utility>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// `bytes` of device memory from cudaMalloc, freed on destruction; move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// RESOURCE_EXHAUSTED when the device cannot hold `bytes` more.
  static StatusOr<DeviceBuffer> allocate(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Page-locked host memory (cudaMallocHost), so host<->device copies can run asynchronously.
class PinnedHostBuffer {
 public:
  PinnedHostBuffer() = default;
  static StatusOr<PinnedHostBuffer> allocate(std::size_t bytes);
  ~PinnedHostBuffer();
  PinnedHostBuffer(PinnedHostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedHostBuffer& operator=(PinnedHostBuffer&& other) noexcept;
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace pagoda::cuda
