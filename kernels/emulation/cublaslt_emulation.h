// The emulated cuBLASLt's one switch (cublaslt_emulation.cc): whether it has FP8 algorithms with
// per-row (OUTER_VEC_32F) scale vectors, the one difference between the GPUs the executor meets.
#pragma once

namespace pagoda::emulation {

/// Whether the emulated cuBLASLt runs FP8 products with OUTER_VEC_32F scale vectors. False, as
/// CUDA 13's cuBLASLt on Hopper answers (its heuristic returns CUBLAS_STATUS_INVALID_VALUE, GPU
/// run 15), unless PAGODA_EMULATED_CUBLASLT_OUTER_VEC=1 or set_cublaslt_outer_vec_scales(true)
/// says otherwise (Blackwell's answer), so a caller's both paths can run here.
bool cublaslt_outer_vec_scales();

/// Overrides the environment variable for the rest of the process (or until the next call).
void set_cublaslt_outer_vec_scales(bool supported);

}  // namespace pagoda::emulation
