// The CPU executor's load step for the AVX-512 VNNI decode kernel: the decoder's matrices
// repacked into 16-row panels (interleaved_rows.h), which that kernel reads in one stream.
// The panels replace the views; the mapped file's pages of those matrices are then no longer
// read, so the kernel may drop them and memory holds one copy of each (a tied embedding keeps the
// file's rows beside the LM head's panels).
#pragma once

#include <cstddef>

#include "backend/cpu/thread_pool.h"
#include "models/llama_weights.h"

namespace pagoda::models {

/// What interleave_for_decode repacked.
struct InterleaveSummary {
  int num_matrices = 0;
  std::size_t bytes = 0;  ///< the panels', padding rows included
};

/// Replaces every layer's q/k/v/o/gate/up/down_proj view and lm_head by its interleaved copy,
/// kept in weights.interleaved, where interleave_supported(dtype) and the view has no input
/// permutation; embed_tokens keeps the file's rows even when lm_head is the same tensor. The
/// matrices are repacked on `pool`'s threads.
InterleaveSummary interleave_for_decode(LlamaWeights& weights, cpu::ThreadPool& pool);

}  // namespace pagoda::models
