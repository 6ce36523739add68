// Runtime instruction-set checks. The library is built for the baseline x86-64 target; kernels
// that need more live in *_avx2.cc / *_avx512.cc files compiled with extra flags and are only
// called when the running CPU reports the features. PAGODA_CPU_ISA=baseline|avx2|avx512 caps the
// choice, so every tier can be tested and measured on one machine.
#pragma once

namespace pagoda::cpu {

/// Whether the CPU runs AVX2, FMA and F16C (every x86 core since Haswell / Zen 1).
bool cpu_has_avx2();

/// Whether it also runs AVX-512 F and BW (Skylake-SP, Ice Lake, Zen 4 and later).
bool cpu_has_avx512();

/// Whether it also runs AVX-512 VNNI (Ice Lake, Zen 4 and later): integer dot products.
bool cpu_has_avx512_vnni();

/// Whether batched matmuls may round activations to int16 (kBroadcastInt16): the CPU has VNNI
/// and PAGODA_CPU_INT16=1 asks for it. Opt-in: 1-11-row steps keep fp32 kernels, so a
/// sequence's numerics would depend on how many rows share its step (docs/quantization.md).
bool cpu_int16_activations();

}  // namespace pagoda::cpu
