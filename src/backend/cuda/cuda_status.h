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

/// Lets kKernel launch with kBytes of dynamic shared memory (past the 48 KiB default). The
/// attribute belongs to the function, not to a launch, so it is set on the first call for each
/// kernel instance (the template's own static) and that result is returned after: not paid on
/// every layer of every step.
template <auto kKernel, int kBytes>
Status opt_in_shared_memory() {
  static const cudaError_t result = cudaFuncSetAttribute(
      reinterpret_cast<const void*>(kKernel), cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  return cuda_status(result, "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
}

}  // namespace pagoda::cuda

/// Returns a Status from the enclosing function when the CUDA runtime call fails.
#define PAGODA_CUDA_RETURN_IF_ERROR(call) \
  PAGODA_RETURN_IF_ERROR(::pagoda::cuda::cuda_status((call), #call))

/// Returns a Status from the enclosing function when the cuBLAS / cuBLASLt call fails.
#define PAGODA_CUBLAS_RETURN_IF_ERROR(call) \
  PAGODA_RETURN_IF_ERROR(::pagoda::cuda::cublas_status((call), #call))
