#include "engine/device.h"

#include <string>

#if PAGODA_HAVE_CUDA
#include "backend/cuda/cuda_device.h"
#endif

namespace pagoda::engine {

std::string_view device_name(Device device) {
  return device == Device::kCuda ? "cuda" : "cpu";
}

bool cuda_available() {
#if PAGODA_HAVE_CUDA
  return cuda::cuda_device_count() > 0;
#else
  return false;
#endif
}

StatusOr<Device> resolve_device(std::string_view requested) {
  if (requested.empty()) return cuda_available() ? Device::kCuda : Device::kCpu;
  if (requested == "cpu") return Device::kCpu;
  if (requested != "cuda") {
    return invalid_argument("--device must be cuda or cpu, got \"" + std::string(requested) + "\"");
  }
#if PAGODA_HAVE_CUDA
  if (!cuda_available()) {
    return Status(StatusCode::kUnavailable,
                  "--device cuda: no CUDA device is visible (check nvidia-smi and "
                  "CUDA_VISIBLE_DEVICES), or add --device cpu");
  }
  return Device::kCuda;
#else
  return Status(StatusCode::kUnavailable,
                "--device cuda: this pagoda was built without CUDA (no nvcc at configure time); "
                "add --device cpu");
#endif
}

}  // namespace pagoda::engine
