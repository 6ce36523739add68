// gpu_bench kernels decode / prefill: paged attention against the same-run ceilings (G1-G3,
// G10), each kernel variant on the same shapes, and over an FP8 cache.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/cuda/bench_util.h"

namespace pagoda::bench {

/// Llama-3-8B-shaped paged decode attention at `batch` x `context`; `sweep`: extra rows with
/// these split counts forced, to check the planner's choice.
void bench_decode_attention(const Ceilings& ceil, int num_sms, std::int64_t batch,
                            std::int64_t context, const char* name, const char* goal,
                            std::vector<int> sweep = {});

/// G10: causal prefill over 4k tokens at head_dim 128, every prefill kernel.
void bench_prefill_attention(const Ceilings& ceil);

}  // namespace pagoda::bench
