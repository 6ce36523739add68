// An owned, non-blocking CUDA stream: the executor issues a whole forward pass on one.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// cudaStreamCreateWithFlags(cudaStreamNonBlocking), destroyed with the object; move-only.
class CudaStream {
 public:
  CudaStream() = default;
  static StatusOr<CudaStream> create();
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  /// Waits for everything issued so far.
  Status synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace pagoda::cuda
