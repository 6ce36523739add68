// Runtime instruction-set checks. The library is built for the baseline x86-64 target; kernels
// that need more live in *_avx2.cc files compiled with extra flags and are only called when the
// running CPU reports the features.
#pragma once

namespace pagoda::cpu {

/// Whether the CPU runs AVX2, FMA and F16C (every x86 core since Haswell / Zen 1).
bool cpu_has_avx2();

}  // namespace pagoda::cpu
