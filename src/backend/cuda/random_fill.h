// Random device tensors without a host round trip: `--load-format dummy` weights of real shapes
// (gigabytes) and benchmark inputs. Counter-based, so the same seed gives the same tensor.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::cuda {

/// dst[i] = uniform in [low, high), from a hash of (seed, i), rounded to `type`.
Status fill_uniform(void* dst /* [n] of type */, std::int64_t n, ScalarType type, float low,
                    float high, std::uint64_t seed, cudaStream_t stream);

}  // namespace pagoda::cuda
