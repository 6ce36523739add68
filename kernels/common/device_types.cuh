// Device-side element types: conversion to and from the fp32 the kernels compute in, 16-byte
// packs for vector loads, and the dispatch from a runtime ScalarType to a template argument.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <string>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <>
__device__ __forceinline__ float to_float<__nv_fp8_e4m3>(__nv_fp8_e4m3 x) {
  return static_cast<float>(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
/// Round to nearest even, saturated to +-448 (NaN stays NaN): quant::float_to_fp8_e4m3's rule.
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float x) {
  __nv_fp8_e4m3 code;
  code.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return code;
}

/// 16 bytes of T: what one thread moves per vector load (8 bf16/fp16, 4 fp32).
template <typename T>
struct alignas(16) Pack {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
  T v[kSize];
};

/// One 16-byte load; `p` must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  Pack<T> pack;
  *reinterpret_cast<uint4*>(&pack) = raw;
  return pack;
}

/// One 16-byte store; `p` must be 16-byte aligned.
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& pack) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&pack);
}

/// True when `p` may be read with 16-byte loads.
inline bool is_aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

/// Calls `fn.template operator()<T>()` with T the device type of `type` (float, __half,
/// __nv_bfloat16): one runtime switch in the launcher, templated kernels below it.
template <typename Fn>
Status dispatch_scalar_type(cuda::ScalarType type, Fn&& fn) {
  switch (type) {
    case cuda::ScalarType::kF32: return fn.template operator()<float>();
    case cuda::ScalarType::kF16: return fn.template operator()<__half>();
    case cuda::ScalarType::kBF16: return fn.template operator()<__nv_bfloat16>();
  }
  return invalid_argument("unknown scalar type");
}

}  // namespace pagoda::kernels

/// In a launcher: INVALID_ARGUMENT naming the op and the failed condition unless `cond` holds.
#define PAGODA_KERNEL_REQUIRE(cond, op)                                           \
  do {                                                                            \
    if (!(cond)) return ::pagoda::invalid_argument(std::string(op) + ": " #cond); \
  } while (0)
