// A kernel source compiled as host C++ (PAGODA_CUDA_EMULATION) runs on the CPU: each CTA's
// threads are fibers scheduled on one OS thread, barriers and warp collectives (mma.sync) are
// rendezvous between them, cp.async copies land only when their group is waited for, and a launch
// runs the grid's CTAs one after another. What it checks is a kernel's logic — index maps, fragment
// layouts, pipeline order, group accounting — against the CPU oracle on machines with no GPU; not
// its speed, nor races between CTAs, nor the memory model beyond what the fibers' order shows.
//
// Force-included (-include) before the kernel source by pagoda_add_emulated_test
// (tests/emulated/CMakeLists.txt). The kernel headers (kernels/common/*.cuh) switch their inline
// PTX to the functions below under PAGODA_CUDA_EMULATION.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#if !defined(PAGODA_CUDA_EMULATION)
#error "cuda_emulation.h is for host builds of kernel sources (PAGODA_CUDA_EMULATION)"
#endif

// Storage the CTA's fibers share: a function-scope __shared__ variable becomes a static one, which
// is right because the CTAs of a launch run one at a time on one OS thread.
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)
// The dynamic shared memory of the running CTA (kernels declare it with this macro).
#define PAGODA_DYNAMIC_SHARED(name) unsigned char* name = ::pagoda::emulation::dynamic_shared()

#define threadIdx (::pagoda::emulation::thread_index())
#define blockIdx (::pagoda::emulation::block_index())
#define blockDim (::pagoda::emulation::block_dim())
#define gridDim (::pagoda::emulation::grid_dim())

using std::max;
using std::min;

namespace pagoda::emulation {

uint3 thread_index();
uint3 block_index();
dim3 block_dim();
dim3 grid_dim();
unsigned char* dynamic_shared();

/// Blocks the calling fiber until every live thread of its CTA (or of its warp) has arrived.
void sync_cta();
void sync_warp();

/// The calling thread's lane in its warp.
int lane_id();

/// The lane's share of a warp-wide exchange: each lane deposits `bytes` of its own, the warp
/// meets, and `all` then holds every lane's deposit (32 * bytes, lane-major) until the next
/// exchange of the warp.
const unsigned char* warp_exchange(const void* mine, std::size_t bytes);

/// cp.async: a copy of `bytes` (zero-fill when `valid` is false) into the open group of the
/// calling thread; commit closes the group; wait performs every group but the `pending` newest.
void async_copy(std::uint32_t shared_address, const void* src, int bytes, bool valid);
void async_commit();
void async_wait(int pending);
std::uint32_t shared_address(const void* p);
void* shared_pointer(std::uint32_t address);

/// Runs `cta` once per block of `grid`, with `block` fiber threads each and `shared_bytes` of
/// dynamic shared memory.
void run_grid(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& cta);

/// Work for `stream`: run now, or recorded into the graph the stream is capturing
/// (cuda_runtime_emulation.cc) and run at each replay.
void submit(cudaStream_t stream, std::function<void()> work);

/// Whether a GPU would start this launch: the block and grid within the device's limits, and the
/// dynamic shared memory within 48 KB or what cudaFuncSetAttribute allowed `kernel`. If not, the
/// error is the next cudaGetLastError's, as a launch's is.
bool launch_allowed(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes);

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
            cudaStream_t stream, Args&&... args) {
  if (!launch_allowed(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes)) return;
  // The arguments converted once, as a launch copies them into the kernel's parameter space (a
  // graph keeps that copy and replays it).
  auto params = std::make_shared<std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
  submit(stream,
         [=] { run_grid(grid, block, shared_bytes, [&] { std::apply(kernel, *params); }); });
}

}  // namespace pagoda::emulation

inline void __syncthreads() {
  ::pagoda::emulation::sync_cta();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::pagoda::emulation::sync_warp();
}
inline void __threadfence() {}
// The runtime's template form, which nvcc's implicit cuda_runtime.h declares.
template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
template <typename T>
T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}
template <typename T>
T __ldcg(const T* p) {
  return *p;
}
template <typename T>
T __ldcs(const T* p) {
  return *p;
}
template <typename T>
T __ldg(const T* p) {
  return *p;
}

namespace pagoda::emulation {
// The warp collectives below exchange all 32 lanes' values: a partial mask, which on a GPU leaves
// the other lanes out, is not emulated and stops the run.
inline void expect_full_mask(unsigned mask) {
  if (mask != 0xffffffffu) {
    std::fprintf(stderr, "cuda emulation: warp collective with mask %#x (only full masks)\n", mask);
    std::abort();
  }
}
}  // namespace pagoda::emulation

// Warp shuffles: every lane of the warp takes part (the kernels pass full masks).
template <typename T>
T emulated_shuffle(T v, int source, int width) {
  const auto* all = reinterpret_cast<const T*>(::pagoda::emulation::warp_exchange(&v, sizeof(T)));
  const int lane = ::pagoda::emulation::lane_id();
  const int base = lane / width * width;
  return all[base + ((source % width) + width) % width];
}
template <typename T>
T __shfl_sync(unsigned mask, T v, int source, int width = 32) {
  ::pagoda::emulation::expect_full_mask(mask);
  return emulated_shuffle(v, source, width);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  ::pagoda::emulation::expect_full_mask(mask);
  return emulated_shuffle(v, (::pagoda::emulation::lane_id() % width) ^ lane_mask, width);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  ::pagoda::emulation::expect_full_mask(mask);
  const int in_segment = ::pagoda::emulation::lane_id() % width + static_cast<int>(delta);
  const T got = emulated_shuffle(
      v, in_segment < width ? in_segment : in_segment - static_cast<int>(delta), width);
  return got;
}
// Byte n of the result is byte (s >> 4n) & 7 of the 8 bytes {y, x} (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n)
    r |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
  return r;
}

// Packed 16-bit FMA, which the CUDA headers declare for device code only: the product and sum in
// fp32, then rounded once to the pair's type. The kernels use it on small integers, where it is
// exact either way.
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return __floats2bfloat162_rn(std::fma(__low2float(a), __low2float(b), __low2float(c)),
                               std::fma(__high2float(a), __high2float(b), __high2float(c)));
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return __floats2half2_rn(std::fma(__low2float(a), __low2float(b), __low2float(c)),
                           std::fma(__high2float(a), __high2float(b), __high2float(c)));
}

// Warp votes: every lane of the warp takes part (the kernels pass full masks).
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  ::pagoda::emulation::expect_full_mask(mask);
  const int mine = predicate != 0 ? 1 : 0;
  const auto* all =
      reinterpret_cast<const int*>(::pagoda::emulation::warp_exchange(&mine, sizeof(int)));
  unsigned bits = 0;
  for (int lane = 0; lane < 32; ++lane) bits |= static_cast<unsigned>(all[lane]) << lane;
  return bits;
}
inline int __any_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0u ? 1 : 0;
}

// Bit counts: __ffs is 1 + the lowest set bit's index (0 for 0), __clz the leading zeros (32 for
// 0).
inline int __ffs(int x) {
  return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1;
}
inline int __clz(int x) {
  return std::countl_zero(static_cast<unsigned>(x));
}
inline unsigned __float_as_uint(float x) {
  return std::bit_cast<unsigned>(x);
}
inline float __uint_as_float(unsigned x) {
  return std::bit_cast<float>(x);
}

// fp32 arithmetic with the rounding named (round to nearest even), never contracted into an FMA:
// what the host's IEEE operations give, so the kernels' epilogues and scales keep their bits.
inline float __fmul_rn(float a, float b) {
  volatile float r = a * b;
  return r;
}
inline float __fadd_rn(float a, float b) {
  volatile float r = a + b;
  return r;
}
inline float __fsub_rn(float a, float b) {
  volatile float r = a - b;
  return r;
}
inline float __fdiv_rn(float a, float b) {
  return a / b;
}
// The GPU's rsqrtf is approximate (2 ulp); the emulation's is the correctly rounded 1 / sqrt.
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}
