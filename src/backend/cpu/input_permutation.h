// Weights whose stored columns are a permutation of the input channels (GPTQ act-order repacked
// so each 32-block holds one group): the activations are gathered into the stored order first,
//
//   y = x · W^T = x[:, perm] · W_stored^T,   W_stored[:, j] = W[:, perm[j]]
//
// and then multiplied by the ordinary kernels.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/matmul.h"
#include "backend/cpu/thread_pool.h"

namespace pagoda::cpu {

/// xp[i, j] = x[i, perm[j]].
void gather_columns(const float* x /* [m, k] */, std::int64_t m, std::int64_t k,
                    const std::int32_t* perm /* [k] */, float* xp /* [m, k] */);

/// Whether any output's weight carries an input permutation.
bool any_input_permutation(std::span<const MatmulOutput> outputs);

/// matmul_fused for outputs some of which have permuted inputs: each such weight runs on its
/// own gathered copy of x; the rest stay fused.
void matmul_permuted(ThreadPool& pool, const float* x /* [m, K] */, std::int64_t m,
                     std::span<const MatmulOutput> outputs, MatmulKernel kernel);

/// matmul_reference for a weight with an input permutation.
void matmul_reference_permuted(const float* x /* [m, K] */, std::int64_t m,
                               const TensorView& w /* [N, K] */, const float* bias,
                               float* y /* [m, N] */);

}  // namespace pagoda::cpu
