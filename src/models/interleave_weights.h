// The CPU executor's load step for the AVX-512 VNNI decode kernel: the decoder's matrices
// repacked into 16-row panels (interleaved_rows.h), which that kernel reads in one stream.
// The panels replace the views; the mapped file's pages of those matrices are then no longer
// read, and the executor releases them (release_mapped_pages), so memory holds one copy of each
// (a tied embedding keeps reading the file's rows of the tokens it looks up).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "models/llama_weights.h"

namespace pagoda::models {

/// What interleave_for_decode repacked.
struct InterleaveSummary {
  int num_matrices = 0;
  std::size_t bytes = 0;  ///< the panels', padding rows included
  /// The row-major bytes each repacked view pointed into before.
  std::vector<std::span<const std::uint8_t>> sources;
};

/// Replaces every layer's q/k/v/o/gate/up/down_proj view and lm_head by its interleaved copy,
/// kept in weights.interleaved, where interleave_supported(dtype) and the view has no input
/// permutation; embed_tokens keeps the file's rows even when lm_head is the same tensor. The
/// matrices are repacked on `pool`'s threads.
InterleaveSummary interleave_for_decode(LlamaWeights& weights, cpu::ThreadPool& pool);

}  // namespace pagoda::models
