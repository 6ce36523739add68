// Per-ISA clones of a plain loop: on x86-64 with GCC or Clang the function is compiled for
// x86-64-v4 (AVX-512), v3 (AVX2 + FMA) and the baseline, and the loader picks the best the CPU
// runs (ifunc). For load-time loops over every weight of a model, where auto-vectorization is
// enough and hand-written intrinsics would be a second copy of the same arithmetic. The clones
// compute the same bits: IEEE operations round the same way at every width, and fmaf is one
// rounding whether the FMA unit or libm computes it.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PAGODA_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PAGODA_VECTOR_CLONES
#endif
