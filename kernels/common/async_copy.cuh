// cp.async (sm_80+): 16-byte copies from global to shared memory that hold no registers while in
// flight, grouped and waited on per thread.
#pragma once

#include <cstdint>

// The CTA's dynamic shared memory, 16-byte aligned (a pointer into the running CTA's buffer
// under the CPU emulation).
#ifndef PAGODA_DYNAMIC_SHARED
#define PAGODA_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

namespace pagoda::kernels {

#if defined(PAGODA_CUDA_EMULATION)
inline std::uint32_t smem_u32(const void* p) {
  return emulation::shared_address(p);
}
inline void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  emulation::async_copy(dst, src, 16, valid);
}
inline void cp_async_8(std::uint32_t dst, const void* src) {
  emulation::async_copy(dst, src, 8, true);
}
inline void cp_async_4(std::uint32_t dst, const void* src) {
  emulation::async_copy(dst, src, 4, true);
}
inline void cp_async_commit() {
  emulation::async_commit();
}
template <int kPending>
void cp_async_wait() {
  emulation::async_wait(kPending);
}
inline void cp_async_wait_at_most(int pending) {
  emulation::async_wait(pending < 0 || pending > 8 ? 8 : pending);
}
#else
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// 16 bytes global -> shared, L2 only (.cg); `valid` false writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
/// 8 or 4 bytes global -> shared (.ca: the small forms have no L2-only variant); always valid.
__device__ __forceinline__ void cp_async_8(std::uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_4(std::uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
/// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}
/// cp_async_wait for a count known only at run time, 0 to 8 (more waits as for 8).
__device__ __forceinline__ void cp_async_wait_at_most(int pending) {
  switch (pending) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<8>(); break;
  }
}
#endif

}  // namespace pagoda::kernels

// PAGODA_DYNAMIC_SHARED with a stronger alignment (the emulation's buffer is 1024-byte aligned).
#ifndef PAGODA_DYNAMIC_SHARED_ALIGNED
#if defined(PAGODA_CUDA_EMULATION)
#define PAGODA_DYNAMIC_SHARED_ALIGNED(name, alignment) PAGODA_DYNAMIC_SHARED(name)
#else
#define PAGODA_DYNAMIC_SHARED_ALIGNED(name, alignment) \
  extern __shared__ __align__(alignment)               \
  unsigned char name[]
#endif
#endif

// The dynamic shared memory as an array of `type` (PAGODA_DYNAMIC_SHARED's bytes, typed).
#ifndef PAGODA_DYNAMIC_SHARED_AS
#if defined(PAGODA_CUDA_EMULATION)
#define PAGODA_DYNAMIC_SHARED_AS(type, name) \
  type* name = reinterpret_cast<type*>(::pagoda::emulation::dynamic_shared())
#else
#define PAGODA_DYNAMIC_SHARED_AS(type, name) extern __shared__ type name[]
#endif
#endif
