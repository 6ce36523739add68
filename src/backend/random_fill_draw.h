// One element of a random tensor, for host and device: cuda::fill_uniform draws device tensors
// with it and the CPU's --load-format dummy weights (models/llama_weights.h) with it, so both
// executors get the same dummy weights from the same seed, bit for bit once rounded to bf16.
#pragma once

#include <cmath>
#include <cstdint>

#include "sampling/random_draw.h"

namespace pagoda {

/// Uniform in [low, low + scale) for element `index` of the tensor drawn with `seed`: a hash of
/// (seed, index), so no element depends on the order the others were drawn in.
PAGODA_HOST_DEVICE float random_fill_value(std::uint64_t seed, std::uint64_t index, float low,
                                           float scale) {
  const std::uint64_t bits = sampling::mix64(seed * 0x9e3779b97f4a7c15ULL + index);
  const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  // fmaf on both sides: nvcc contracts `low + scale * unit` to an FMA, a host compiler may not.
  return fmaf(scale, unit, low);
}

}  // namespace pagoda
