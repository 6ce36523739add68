// A plain kernel launch (no PDL attribute) as a function, so that kernel sources compiled as
// host C++ for the CPU emulation (kernels/emulation/) hold no <<<...>>> syntax.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "backend/cuda/cuda_status.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

#if defined(PAGODA_CUDA_EMULATION)
template <typename... Params, typename... Args>
Status launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                     cudaStream_t stream, std::string_view name, Args&&... args) {
  emulation::launch(kernel, grid, block, shared_bytes, stream, std::forward<Args>(args)...);
  return cuda::check_launch(name);
}
#else
/// kernel<<<grid, block, shared_bytes, stream>>>(args...), then check_launch(name).
template <typename... Params, typename... Args>
Status launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
                     cudaStream_t stream, std::string_view name, Args&&... args) {
  // clang-format splits the closing chevrons here.
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
  return cuda::check_launch(name);
}
#endif

}  // namespace pagoda::kernels
