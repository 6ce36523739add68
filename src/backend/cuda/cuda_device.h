// The GPU this process runs on: whether there is one, what it is, and how much memory is free.
#pragma once

#include <cstdint>
#include <string>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// Visible CUDA devices; 0 when there is no driver or no GPU (never an error, so callers can
/// choose the CPU backend or skip a test).
int cuda_device_count();

/// What the kernels and the planner need to know about the current device.
struct DeviceProperties {
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int num_sms = 0;
  std::int64_t l2_bytes = 0;
  std::int64_t total_memory_bytes = 0;
};

/// Properties of the current device.
StatusOr<DeviceProperties> current_device_properties();

/// Device memory in bytes: free now and total.
struct DeviceMemory {
  std::int64_t free_bytes = 0;
  std::int64_t total_bytes = 0;
};

/// cudaMemGetInfo after a device synchronize, so finished frees are counted.
StatusOr<DeviceMemory> device_memory();

/// Bytes the KV cache may take so that this process stays under `utilization` of the device's
/// memory: utilization * total - (total - free). Call it after the weights, the activation buffers
/// and a profiling forward pass at the largest batch have claimed their memory, so the peak is
/// already in `free`. RESOURCE_EXHAUSTED when nothing is left, with the numbers.
StatusOr<std::int64_t> kv_cache_budget_bytes(double utilization);

}  // namespace pagoda::cuda
