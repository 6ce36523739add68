// The one random draw every backend makes (include/pagoda/step_sampling.h): counter-based, keyed
// by (request seed, output position, token id), so a request's token never depends on what it
// is batched with, on preemption, or on the backend. Host and device compile the same integer
// hash, so both see bit-identical uniforms; only logf's last ulp may differ between them.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define PAGODA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PAGODA_HOST_DEVICE inline
#endif

namespace pagoda::sampling {

/// splitmix64's finalizer: a bijection with full avalanche.
PAGODA_HOST_DEVICE std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/// A 32-bit bijection with low bias (two multiply-xorshift rounds); cheap in 8- or 16-lane
/// integer SIMD, which is why the per-token hash is 32-bit.
PAGODA_HOST_DEVICE std::uint32_t mix32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// The key of one draw: a request's seed and the output index of the token being drawn.
PAGODA_HOST_DEVICE std::uint64_t draw_key(std::uint64_t seed, std::int64_t position) {
  return mix64(seed ^ mix64(static_cast<std::uint64_t>(position) + 0x9e3779b97f4a7c15ULL));
}

/// 32 random bits for token `id` of the draw `key`.
PAGODA_HOST_DEVICE std::uint32_t token_bits(std::uint64_t key, std::uint32_t id) {
  const auto k0 = static_cast<std::uint32_t>(key);
  const auto k1 = static_cast<std::uint32_t>(key >> 32);
  return mix32(mix32(id ^ k0) + k1);
}

/// A uniform in (0, 1) from the top 23 bits, exact in float: (m + 0.5) / 2^23.
PAGODA_HOST_DEVICE float bits_to_uniform(std::uint32_t bits) {
  return (static_cast<float>(bits >> 9) + 0.5f) * 0x1p-23f;
}

/// Gumbel noise -log(-log(u)) for token `id` of the draw `key`: argmax of logit / T + noise over
/// the kept tokens is a draw from their softmax.
PAGODA_HOST_DEVICE float token_gumbel(std::uint64_t key, std::uint32_t id) {
  const float u = bits_to_uniform(token_bits(key, id));
#if defined(__CUDA_ARCH__)
  return -logf(-logf(u));
#else
  return -std::log(-std::log(u));
#endif
}

/// A uniform in [0, 1) for a scalar choice keyed by (key, stream) (rejection sampling's accept
/// test), from 53 bits.
PAGODA_HOST_DEVICE double key_uniform(std::uint64_t key, std::uint64_t stream) {
  return static_cast<double>(mix64(key ^ mix64(stream + 0x632be59bd9b4e019ULL)) >> 11) * 0x1.0p-53;
}

}  // namespace pagoda::sampling
