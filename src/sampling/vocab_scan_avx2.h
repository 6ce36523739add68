// AVX2 + FMA versions of the vocab_scan.h passes, 8 tokens per step. Call only when
// cpu::cpu_has_avx2().
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace pagoda::sampling::avx2 {

/// The lowest index of the largest of x (n >= 1).
std::int64_t argmax_index(const float* x /* [n] */, std::int64_t n);

/// As sampling::gumbel_race: the hash in 8 integer lanes and log as a polynomial (within 1 ulp
/// of logf), so a score may differ from the scalar one in its last ulp.
std::int64_t gumbel_race(const float* x /* [n] */, std::int64_t n, float scale,
                         const std::int32_t* ids /* [n] or null */, std::uint64_t key);

/// sum of exp(x[i] * scale - shift): exp in fp32 (exp256), blocks of 128 summed in fp32, the
/// blocks in double.
double sum_exp_scaled(const float* x /* [n] */, std::int64_t n, float scale, float shift);

/// As sampling::gather_at_least: each block of 8 left-packed and stored whole.
std::size_t gather_at_least(const float* x /* [n] */, std::int64_t n, float scale, float floor,
                            float* s /* [n + 8] */, std::int32_t* ids /* [n + 8] */);

/// p[i] = exp(s[i] - shift) with exp256.
void exp_shifted(const float* s /* [n] */, std::int64_t n, float shift, double* p /* [n] */);

/// Appends x[i] for i in [begin, end) with x[i] > threshold.
void append_greater(const float* x, std::int64_t begin, std::int64_t end, float threshold,
                    std::vector<float>& out);

}  // namespace pagoda::sampling::avx2
