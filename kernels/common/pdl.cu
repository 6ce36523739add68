#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/common/pdl.cuh"

namespace pagoda::kernels {

namespace {

std::atomic<bool>& switched_on() {
  static std::atomic<bool> on{[] {
    const char* env = std::getenv("PAGODA_DISABLE_PDL");
    return env == nullptr || std::strcmp(env, "1") != 0;
  }()};
  return on;
}

// Per device, asked once: launches must not pay two runtime queries each.
bool device_has_pdl() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> known[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return false;
  int state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    const bool ok =
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess;
    state = ok && major >= 9 ? 2 : 1;
    known[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}

}  // namespace

bool pdl_enabled() {
  return switched_on().load(std::memory_order_relaxed) && device_has_pdl();
}

void set_pdl_enabled(bool enabled) {
  switched_on().store(enabled, std::memory_order_relaxed);
}

}  // namespace pagoda::kernels
