// W4A16: y = x W^T (+ bias) with 16-bit activations and 4-bit weights (GPTQ, AWQ, int4 RTN,
// GGUF Q4_0, Q4_1, Q4_K) or 5- to 8-bit ones (W8A16: GGUF Q5_0, Q5_1, Q8_0, Q5_K, Q6_K) in the tile
// layout of quant/w4a16_layout.h, dequantized in registers straight into tensor-core fragments
// (the Marlin recipe, ../shared/GPU.md 4.3).
//
// Per 16-column step a lane turns one 32-bit word into four B registers with a mask and an OR
// (16-bit floats {magic + q}) and one exact subtraction of {magic + z}: the fragments hold the
// integers q - z, so mma.m16n8k16 sums x (q - z) over a group in fp32 and the group's fp16 scale
// multiplies that sum once. The weights are never rounded: the only rounding besides fp32
// summation is the output's. Weights stream once per 16 (m <= 16), 32 or 64 rows of x, each
// warp's through a ring of 8 tiles in shared memory (cp.async); the CTA's rows of x wait in
// shared memory, shared by its 4 warps (one 16-row weight tile each), and each group's zeros and
// scales are loaded a group ahead. When there are too few weight tiles to fill the GPU, K splits
// over CTAs whose partial sums the last CTA of each tile (or, without counters, a second kernel)
// adds in a fixed order (deterministic: the same bits every run).
//
// For large m the executor dequantizes to 16-bit rows (launch_w4a16_dequantize) and calls
// cuBLASLt instead (kW4A16KernelMaxRows, measured: w4a16_linear.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/scalar_type.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

/// A W4A16Matrix uploaded as is (quant/w4a16_layout.h), in the zero-point form (zeros) or the
/// GGUF form (scale_codes, and mins where the type has them).
struct W4A16Weights {
  const std::uint32_t* packed = nullptr;  ///< row_tiles * k_tiles * 128 words
  /// fp16, [groups][padded_rows]; the GGUF form: [scale_groups][padded_rows]
  const std::uint16_t* scales = nullptr;
  const std::uint8_t* zeros = nullptr;  ///< [groups][padded_rows]; null in the GGUF form
  std::int64_t rows = 0;                ///< n
  std::int64_t cols = 0;                ///< k
  /// A multiple of 32 (cols: per channel); the GGUF form: 32 or 16.
  std::int64_t group_size = 0;
  // The GGUF form (scale_codes non-null).
  /// Codes' bits above the low nibble (quant/w4a16_layout.h); null with hi_bits 0.
  const std::uint32_t* packed_hi = nullptr;
  const std::int8_t* scale_codes = nullptr;  ///< [groups][padded_rows]
  const std::uint16_t* mins = nullptr;       ///< fp16, [scale_groups][padded_rows], or null
  const std::int8_t* min_codes = nullptr;    ///< [groups][padded_rows] (with mins)
  int super_shift = 0;                       ///< groups per scale and min: 1 << super_shift
  int code_zero = 0;                         ///< subtracted from every code
  int hi_bits = 0;                           ///< 0, 1, 2 or 4: 4-, 5-, 6- or 8-bit codes
};

struct W4A16GemmParams {
  const void* x = nullptr;  ///< [m, cols] dtype, row-major; already in stored column order
  W4A16Weights w;
  const void* bias = nullptr;  ///< [rows] dtype, or nullptr
  void* y = nullptr;           ///< [m, rows] dtype, or fp32 with y_fp32
  /// y in fp32, unrounded (the LM head's logits); bias stays in dtype.
  bool y_fp32 = false;
  std::int64_t m = 0;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< kBF16 or kF16
  /// fp32 partial sums when K is split over CTAs: w4a16_gemm_workspace_bytes(m, rows, cols).
  float* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  /// Zeroed counters, w4a16_gemm_counter_count(m or more, rows) of them, kept by the caller
  /// across launches (each launch leaves them at zero): with them the last CTA of each output
  /// tile adds the K splits itself; without, a second kernel does (the same bits either way).
  int* counters = nullptr;
  std::int64_t counters_count = 0;
};

/// Counters a launch of up to `max_m` rows of x over an n-row weight needs.
std::int64_t w4a16_gemm_counter_count(std::int64_t max_m, std::int64_t n);

/// Workspace launch_w4a16_gemm uses for this shape on the current device (0: none); enough for
/// every weight form's plan.
std::size_t w4a16_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t k);

/// True when `p` can run: 16-bit dtype, m >= 1, cols a multiple of 32, group_size a multiple of
/// 32 (the GGUF form: 16 or 32), x and every weight array 16-byte aligned (as cudaMalloc gives).
bool w4a16_gemm_applies(const W4A16GemmParams& p);

/// Each output is an fp32 sum of per-group fp32 sums, rounded once to the output type. A
/// workspace smaller than w4a16_gemm_workspace_bytes only means fewer CTAs share K.
Status launch_w4a16_gemm(const W4A16GemmParams& p, cudaStream_t stream);

/// (w4a16_dequantize.cu) out [rows, cols] dtype = d * (q - z), computed exactly in fp32 and
/// rounded once; the GGUF form (S sc) (q - code_zero) + B mc, its fp32 rounding (the CPU
/// dequantizer's value), then the dtype's.
Status launch_w4a16_dequantize(const W4A16Weights& w, void* out, cuda::ScalarType dtype,
                               cudaStream_t stream);

/// out [num_ids, cols] dtype = rows ids[t] of the matrix, each element as
/// launch_w4a16_dequantize writes it, times `scale` (in fp32, rounded once) unless it is 1: the
/// embedding lookup of a table kept quantized (Gemma's scaled one too). Ids out of range give
/// zero rows, as launch_embedding.
Status launch_w4a16_gather_rows(const W4A16Weights& w, const std::int32_t* ids,
                                std::int64_t num_ids, float scale, void* out,
                                cuda::ScalarType dtype, cudaStream_t stream);

/// out [m, k] = x[:, permutation[j]] for each stored column j (GPTQ act-order), 16-bit dtype.
Status launch_gather_columns(const void* x, std::int64_t m, std::int64_t k,
                             const std::int32_t* permutation, void* out, cuda::ScalarType dtype,
                             cudaStream_t stream);

}  // namespace pagoda::kernels
