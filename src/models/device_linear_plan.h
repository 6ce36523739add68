// Which form a linear layer takes on a GPU, decided on the host from the CPU-side weights
// (linear_weights.h), so the choice is tested without a device:
//
//   CPU-side weight                                   16-bit activations   FP32 activations
//   Q4_Z (GPTQ, AWQ, --quantization int4), GGUF Q4_0  kW4A16 (4-bit)       kDense
//   GGUF Q4_1, Q4_K, Q2_K, Q3_K                       kW4A16 (GGUF form)   kDense
//   GGUF Q5_0, Q5_1, Q8_0, Q5_K, Q6_K, or GGUF parts  kW8A16 (GGUF form,   kDense
//     of different types (a Q4_K_M QKV)                 8-bit codes)
//   F8_S with one scale per row (per-tensor or        kFp8 (W8A8)          kDense
//     per-channel FP8, --quantization fp8)
//   anything else (F32/F16/BF16, block-scaled or      kDense               kDense
//     permuted F8_S)
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
// column order and one form. GGUF parts of different types (a Q4_K_M file's Q4_K Q, K with a
// Q6_K V) share the GGUF form's general case (quant/gguf_repack.h).
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
  kW4A16,  ///< 4-bit weights, group scales and zeros or mins (kernels/gemm/w4a16_linear.h)
  kFp8,    ///< E4M3 weights with per-row scales, activations quantized per token (fp8_linear.h)
  kW8A16,  ///< 8-bit GGUF codes in the W4A16 kernel's GGUF form (w4a16_linear.h)
};

/// "dense", "w4a16", "fp8", "w8a16".
std::string_view device_linear_kind_name(DeviceLinearKind kind);

/// The form of the layer whose weight is `parts` stacked by rows (each [rows_i, cols]; one part
/// for an unfused layer), as the table above says. Every part must have the same cols.
DeviceLinearKind device_linear_kind(std::span<const cpu::TensorView> parts, bool activations_16bit);

/// The parts' rows stacked into one owned matrix of their (common) block type, Q4_Z, Q4_0, F8_S
/// or a type of quant/gguf_repack.h, with their common input permutation. INVALID_ARGUMENT when
/// the parts differ in type, columns or permutation, or are of none of those types.
StatusOr<quant::QuantizedMatrix> concatenate_rows(std::span<const cpu::TensorView> parts);

/// The GPU layout of a kW4A16 or kW8A16 layer: the parts stacked, then repacked from Q4_Z, Q4_0
/// or a GGUF type.
StatusOr<quant::W4A16Matrix> w4a16_layout(std::span<const cpu::TensorView> parts);

/// Device bytes the layer of `parts` takes in the form device_linear_kind picks (`dense_bytes`
/// per weight when dense), computed from the shapes for dense and the GGUF forms (their data is
/// not read) and by building the layout for the others: the weights' share of a model's GPU
/// memory, known on the host.
StatusOr<std::size_t> planned_device_bytes(std::span<const cpu::TensorView> parts,
                                           bool activations_16bit, std::size_t dense_bytes);

/// The device form of a token table (the embedding, an LM head): the W4A16 / W8A16 form where
/// device_linear_kind gives one (GGUF types, Q4_Z, Q4_0; rows dequantized per lookup, the LM
/// head through the W4A16 kernel), else kDense (FP8 included: its kernels write no fp32 logits).
DeviceLinearKind device_table_kind(const cpu::TensorView& table, bool activations_16bit);

/// Device bytes of a token table in the form device_table_kind picks (`dense_bytes` per weight
/// when dense).
StatusOr<std::size_t> planned_table_bytes(const cpu::TensorView& table, bool activations_16bit,
                                          std::size_t dense_bytes);

/// The GPU layout of a kFp8 layer: the parts stacked, then split into codes and row scales.
StatusOr<quant::Fp8ChannelMatrix> fp8_layout(std::span<const cpu::TensorView> parts);

/// The largest group (a multiple of 32 that divides cols) over which every row of a Q4_Z matrix
/// repeats one scale and zero: the group_size that describes the matrix exactly.
std::int64_t uniform_q4_z_group_size(const quant::QuantizedMatrix& matrix);

}  // namespace pagoda::models
