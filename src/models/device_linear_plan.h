// Which form a linear layer takes on a GPU, decided on the host from the CPU-side weights
// (linear_weights.h), so the choice is tested without a device:
//
//   CPU-side weight                                   16-bit activations   FP32 activations
//   Q4_Z (GPTQ, AWQ, --quantization int4), GGUF Q4_0  kW4A16 (4-bit)       kDense
//   F8_S with one scale per row (per-tensor or        kFp8 (W8A8)          kDense
//     per-channel FP8, --quantization fp8)
//   anything else (F32/F16/BF16, other GGUF types,    kDense               kDense
//     block-scaled or permuted F8_S)
//
// kDense is today's upload: every weight decoded exactly and rounded once to the activation
// dtype. The 4-bit and FP8 kernels take 16-bit activations only, so an FP32 run (the tests'
// exact mode) multiplies the same quantized numbers dense.
//
// A fused layer (Q, K, V; gate, up) stays one product: its parts' rows are stacked into one
// quantized matrix before the GPU layout is built. That needs one block type and one column
// order for all parts; GPTQ act-order gives q/k/v (and gate/up) the same order, since they see
// the same inputs and so the same Hessian diagonal. Parts that differ (a hand-made file, or
// modules_to_not_convert naming only some of them) are uploaded dense: a W4A16 matrix has one
// column order and one (scale, zero) per 32-block.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "backend/cpu/tensor_view.h"
#include "pagoda/status.h"
#include "quant/fp8_channel_layout.h"
#include "quant/quantized_matrix.h"
#include "quant/w4a16_layout.h"

namespace pagoda::models {

/// The device form of one (possibly fused) linear layer.
enum class DeviceLinearKind : std::uint8_t {
  kDense,  ///< activation dtype, cuBLASLt / skinny GEMM
  kW4A16,  ///< 4-bit weights, group scales and zeros (kernels/gemm/w4a16_linear.h)
  kFp8,    ///< E4M3 weights with per-row scales, activations quantized per token (fp8_linear.h)
};

/// "dense", "w4a16", "fp8".
std::string_view device_linear_kind_name(DeviceLinearKind kind);

/// The form of the layer whose weight is `parts` stacked by rows (each [rows_i, cols]; one part
/// for an unfused layer), as the table above says. Every part must have the same cols.
DeviceLinearKind device_linear_kind(std::span<const cpu::TensorView> parts, bool activations_16bit);

/// The parts' rows stacked into one owned matrix of their (common) block type, Q4_Z, Q4_0 or
/// F8_S, with their common input permutation. INVALID_ARGUMENT when the parts differ in type,
/// columns or permutation, or are not of a 32-block type.
StatusOr<quant::QuantizedMatrix> concatenate_rows(std::span<const cpu::TensorView> parts);

/// The GPU layout of a kW4A16 layer: the parts stacked, then repacked from Q4_Z or Q4_0.
StatusOr<quant::W4A16Matrix> w4a16_layout(std::span<const cpu::TensorView> parts);

/// The GPU layout of a kFp8 layer: the parts stacked, then split into codes and row scales.
StatusOr<quant::Fp8ChannelMatrix> fp8_layout(std::span<const cpu::TensorView> parts);

/// The largest group (a multiple of 32 that divides cols) over which every row of a Q4_Z matrix
/// repeats one scale and zero: the group_size that describes the matrix exactly.
std::int64_t uniform_q4_z_group_size(const quant::QuantizedMatrix& matrix);

}  // namespace pagoda::models
