// AVX2 + FMA passes behind compute_logprobs (logprobs.h): three of its four scans over the
// vocabulary it makes per token (the max is cpu::avx2::max_value). Call only when
// cpu::cpu_has_avx2().
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::sampling::avx2 {

/// sum(exp(x[i] - shift)) for x[i] <= shift: exp in fp32 (within 2 ulp of expf), partial sums of
/// at most 16 terms per lane in fp32, the rest accumulated in double.
double sum_exp_shifted(const float* x /* [n] */, std::int64_t n, float shift);

/// Number of i with x[i] > value.
std::int64_t count_greater(const float* x /* [n] */, std::int64_t n, float value);

/// The k best ids by (value descending, id ascending) as a min-heap on `heap` (front = worst
/// kept), scanning 8 values per compare once the heap is full.
void top_k_heap(const float* x /* [n] */, std::int64_t n, std::int64_t k,
                std::vector<std::int32_t>& heap);

}  // namespace pagoda::sampling::avx2
