#include "backend/cuda/cuda_status.h"

#include <string>

namespace pagoda::cuda {

Status cuda_status(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return Status::ok_status();
  const StatusCode code =
      error == cudaErrorMemoryAllocation ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                          cudaGetErrorString(error) + ")");
}

Status cublas_status(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::ok_status();
  const StatusCode code =
      status == CUBLAS_STATUS_ALLOC_FAILED ? StatusCode::kResourceExhausted : StatusCode::kInternal;
  return Status(code, std::string(what) + ": cuBLAS status " + std::to_string(status));
}

Status check_launch(std::string_view kernel) {
  return cuda_status(cudaGetLastError(), std::string("launch of ") + std::string(kernel));
}

}  // namespace pagoda::cuda
