// Launchers of the kernels that tests/emulated/cuda_runtime_emulation_test.cc issues to streams.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "pagoda/status.h"

namespace pagoda::emulated_test {

/// x[i] += 1 for i < n, issued to `stream` (one thread per element).
Status add_one(float* x, int n, cudaStream_t stream);
/// The same with `threads` per block, for launch-configuration checks.
Status add_one_with_block(float* x, int n, int threads, cudaStream_t stream);
/// One CTA that writes `shared_bytes` of dynamic shared memory and sums it into *out.
Status sum_shared(std::size_t shared_bytes, float* out, cudaStream_t stream);
/// Lets sum_shared use up to `bytes` of dynamic shared memory (cudaFuncSetAttribute).
cudaError_t allow_shared(int bytes);

}  // namespace pagoda::emulated_test
