// Which processor runs the model, and the rule that picks one when the user does not say.
#pragma once

#include <string_view>

#include "pagoda/status.h"

namespace pagoda::engine {

/// Where the model's forward passes run.
enum class Device { kCpu, kCuda };

/// "cpu" or "cuda", as --device spells it.
std::string_view device_name(Device device);

/// Whether this binary has the CUDA backend and at least one GPU is visible.
bool cuda_available();

/// The device `requested` names ("cuda", "cpu", or empty for: cuda when cuda_available(), else
/// cpu). INVALID_ARGUMENT for another value; UNAVAILABLE for "cuda" without a visible GPU or
/// in a build without CUDA.
StatusOr<Device> resolve_device(std::string_view requested);

}  // namespace pagoda::engine
