#include "backend/cuda/cuda_stream.h"

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

StatusOr<CudaStream> CudaStream::create() {
  CudaStream stream;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking));
  return stream;
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

Status CudaStream::synchronize() const {
  PAGODA_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return Status::ok_status();
}

}  // namespace pagoda::cuda
