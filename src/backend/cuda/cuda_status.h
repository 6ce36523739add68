// Every CUDA runtime, cuBLAS and cuBLASLt call is checked; a failure becomes a pagoda::Status
// naming the call, so a bad launch or an out-of-memory surfaces as an error, never as garbage.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// OK for cudaSuccess; otherwise RESOURCE_EXHAUSTED (out of memory) or INTERNAL with `what`.
Status cuda_status(cudaError_t error, std::string_view what);

/// OK for CUBLAS_STATUS_SUCCESS; otherwise INTERNAL (or RESOURCE_EXHAUSTED) with `what`.
Status cublas_status(cublasStatus_t status, std::string_view what);

/// The error of the last kernel launch on this thread (cudaGetLastError), named after `kernel`.
Status check_launch(std::string_view kernel);

}  // namespace pagoda::cuda

/// Returns a Status from the enclosing function when the CUDA runtime call fails.
#define PAGODA_CUDA_RETURN_IF_ERROR(call) \
  PAGODA_RETURN_IF_ERROR(::pagoda::cuda::cuda_status((call), #call))

/// Returns a Status from the enclosing function when the cuBLAS / cuBLASLt call fails.
#define PAGODA_CUBLAS_RETURN_IF_ERROR(call) \
  PAGODA_RETURN_IF_ERROR(::pagoda::cuda::cublas_status((call), #call))
