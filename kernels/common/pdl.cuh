// Programmatic dependent launch (PDL, sm_90+): a kernel launched with it may start while the
// kernel before it on the stream is still running, so its launch and its prologue hide behind
// the other's tail. At batch 1 every decode kernel is a few microseconds of streaming, and the
// gaps between them are what keeps a step from the memory's speed.
//
// The contract, kept by every kernel launched through launch_pdl:
//   pdl_launch_dependents()  may be called early: the next PDL kernel can then be scheduled;
//   pdl_wait()               blocks until the previous kernel has completed and its writes are
//                            visible. Before it a kernel may read only what no kernel of this
//                            step writes (weights, the step metadata copied before the step);
//                            every read or write of activations comes after it.
// Both are no-ops below sm_90 and in a kernel launched without PDL.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>
#include <utility>

#include "backend/cuda/cuda_status.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

#if defined(PAGODA_CUDA_EMULATION)
// The emulation runs one kernel at a time: every launch is already after the one before it.
inline void pdl_wait() {}
inline void pdl_launch_dependents() {}
inline bool& pdl_switch() {
  static bool on = true;
  return on;
}
inline bool pdl_enabled() {
  return pdl_switch();
}
inline void set_pdl_enabled(bool enabled) {
  pdl_switch() = enabled;
}
template <typename... Params, typename... Args>
Status launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                  cudaStream_t stream, std::string_view name, Args&&... args) {
  emulation::launch(kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  return cuda::check_launch(name);
}
#else
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/// Whether launches on the current device get the PDL attribute: a device of compute capability
/// 9.0 or more, unless set_pdl_enabled(false) or PAGODA_DISABLE_PDL=1 turned it off.
bool pdl_enabled();
/// Turns PDL off (or back on) for the whole process: benchmarks compare both, and the CUDA
/// executor falls back to plain launches if a graph with PDL edges cannot be captured.
void set_pdl_enabled(bool enabled);

/// Launches `kernel` like <<<grid, block, shared_bytes, stream>>>, with the programmatic
/// stream-serialization attribute where pdl_enabled(). The kernel must keep the contract above.
template <typename... Params, typename... Args>
Status launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                  cudaStream_t stream, std::string_view name, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (pdl_enabled()) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  PAGODA_RETURN_IF_ERROR(
      cuda::cuda_status(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...), name));
  return cuda::check_launch(name);
}
#endif

}  // namespace pagoda::kernels
