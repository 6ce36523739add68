#include "backend/cuda/cuda_device.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // Clear the sticky "no device" error for later calls.
    return 0;
  }
  return count;
}

StatusOr<DeviceProperties> current_device_properties() {
  int device = 0;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  PAGODA_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  DeviceProperties out;
  out.name = prop.name;
  out.compute_major = prop.major;
  out.compute_minor = prop.minor;
  out.num_sms = prop.multiProcessorCount;
  out.l2_bytes = prop.l2CacheSize;
  out.total_memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  return out;
}

StatusOr<DeviceMemory> device_memory() {
  PAGODA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceMemory{static_cast<std::int64_t>(free_bytes),
                      static_cast<std::int64_t>(total_bytes)};
}

StatusOr<std::int64_t> kv_cache_budget_bytes(double utilization) {
  if (!(utilization > 0.0 && utilization <= 1.0)) {
    return invalid_argument("--gpu-memory-utilization must be in (0, 1]");
  }
  PAGODA_ASSIGN_OR_RETURN(DeviceMemory memory, device_memory());
  const std::int64_t used = memory.total_bytes - memory.free_bytes;
  const auto allowed =
      static_cast<std::int64_t>(utilization * static_cast<double>(memory.total_bytes));
  const std::int64_t budget = allowed - used;
  if (budget <= 0) {
    char message[256];
    std::snprintf(message, sizeof(message),
                  "no GPU memory left for the KV cache: %.2f GiB in use of %.2f GiB, "
                  "--gpu-memory-utilization %.2f allows %.2f GiB; raise it or use a smaller model",
                  used / 1073741824.0, memory.total_bytes / 1073741824.0, utilization,
                  allowed / 1073741824.0);
    return Status(StatusCode::kResourceExhausted, message);
  }
  return budget;
}

}  // namespace pagoda::cuda
