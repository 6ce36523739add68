// Runtime instruction-set checks. The library is built for the baseline x86-64 target; kernels
// that need more live in *_avx2.cc / *_avx512.cc files compiled with extra flags and are only
// called when the running CPU reports the features. PAGODA_CPU_ISA=baseline|avx2|avx512 caps the
// choice, so every tier can be tested and measured on one machine.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

/// Whether the CPU runs AVX2, FMA and F16C (every x86 core since Haswell / Zen 1).
bool cpu_has_avx2();

/// Whether it also runs AVX-512 F and BW (Skylake-SP, Ice Lake, Zen 4 and later).
bool cpu_has_avx512();

/// Whether it also runs AVX-512 VNNI (Ice Lake, Zen 4 and later): integer dot products.
bool cpu_has_avx512_vnni();

/// Whether it also runs AMX-TILE and AMX-INT8 (Sapphire Rapids and later Xeons) with the tile
/// state granted by Linux (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here), AVX-512 VNNI not
/// capped by PAGODA_CPU_ISA, and PAGODA_CPU_AMX=0 not set: the int16 tile then runs its integer
/// products in tiles (matmul_int16_amx.h).
bool cpu_has_amx_int8();

/// Whether matmuls on int16_decodes() weights round activations to int16 (kDirectInt16,
/// kBroadcastInt16) at every row count: the CPU has AVX2 (the AVX-512 VNNI kernels, or their
/// bit-identical AVX2 twins, matmul_int16_avx2.h) and fp32 activations were not asked for
/// (CpuActivations below; docs/quantization.md, "Numerics on the CPU").
bool cpu_int16_activations();

/// Whether those activations are rounded to 8 bits instead of 16: the same contract with codes in
/// [-127, 127] (s = amax / 127; matmul_int16_avx512.h), which every int16 kernel computes
/// exactly and the int8 tile (matmul_int8_avx512.h) computes in half the dot-product instructions.
/// Opt-in (PAGODA_CPU_ACTIVATIONS=int8, `--cpu-activations int8`): 2^8 times coarser than int16,
/// as llama.cpp's Q8_0 activations (docs/quantization.md, "The fidelity rule").
bool cpu_int8_activations();

/// What the matmuls on int16_decodes() weights round their activations to, process-wide:
/// `--cpu-activations`, else PAGODA_CPU_ACTIVATIONS (fp32, int16 or int8; PAGODA_CPU_INT16=0 is
/// fp32), else int16. Set it before an executor loads its weights: whether they are interleaved
/// depends on it (cpu_interleave_weights).
enum class CpuActivations { kFp32, kInt16, kInt8 };
CpuActivations cpu_activations();  ///< as asked: int16 and int8 need AVX2 as well
void set_cpu_activations(CpuActivations activations);

/// The largest |code| of a quantized activation: 127 with int8 activations, else 32767.
inline float cpu_activation_code_max() {
  return cpu_int8_activations() ? 127.0f : 32767.0f;
}

/// The AVX-512 int16 direct kernel's Q4_K, Q4_0 and Q8_0 through VNNI's byte products on x split
/// into bytes (matmul_int16_avx512.h; the same bits): on unless PAGODA_CPU_VNNI_DIRECT=0 or a test
/// turns it off. Here, not in the AVX-512 translation unit, so no AVX-512 code runs before the ISA
/// check.
bool cpu_int16_direct_vnni();

/// Whether the AVX2 int16 kernels (the tile and the interleaved decode kernel) use AVX-VNNI's VEX
/// vpdpwssd (Alder Lake and later, Zen 5; the same int32 sums as vpmaddwd + vpaddd in one
/// instruction): the CPU has it (CPUID.(EAX=7, ECX=1):EAX bit 4, which libgcc's
/// __builtin_cpu_supports misses) and PAGODA_CPU_AVX_VNNI is not "0".
bool cpu_int16_avx_vnni();
void set_cpu_int16_direct_vnni(bool on);

/// Whether the CPU executor, built for steps of at most `max_num_seqs` sequences (0: not known),
/// repacks quantized weights into 16-row panels at load (interleaved_rows.h) for the int16
/// kernels: int16 activations are on (the panels' readers are the int16 kernels), the CPU has no
/// usable AMX (whose tiles read row-major weights), PAGODA_CPU_INTERLEAVE is not "0", and either
/// the CPU has AVX-512 VNNI, or it has AVX2 and PAGODA_CPU_INTERLEAVE is "1" or max_num_seqs is 1
/// or int8 activations run on AVX-VNNI. On AVX2 with int16 codes the panels speed batch-1 decode
/// up (1.2-1.7x) but the tile runs 9-32 rows on them at 0.88-0.98x (serving 16 streams
/// 0.92-0.94x, 4 streams 0.92x or, with AVX-VNNI, 1.07x; docs/perf/cpu.md, "Interleaved panels on
/// AVX2"), so only one-sequence engines (`pagoda generate`, `--max-num-seqs 1`) take them unasked;
/// the int8 tile reads K-quant panels faster than rows at every row count (serving 1.34x at 16
/// streams, 1.65x at 4; "Int8 activations").
bool cpu_interleave_weights(std::int64_t max_num_seqs);

}  // namespace pagoda::cpu
