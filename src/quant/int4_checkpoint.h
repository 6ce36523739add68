// GPTQ and AWQ checkpoints' 4-bit linear layers repacked into Q4_Z blocks at load.
//
// GPTQ (AutoGPTQ / GPTQModel, transformers' `quant_method: gptq`), for a layer W [N, K]:
//   qweight  I32 [K/8, N]   packed along K: qweight[i, n] bits 4j..4j+3 = q[8i + j, n]
//   qzeros   I32 [G, N/8]   packed along N: qzeros[g, c] bits 4j..4j+3 = stored zero of n = 8c+j
//   scales   F16 [G, N]
//   g_idx    I32 [K]        group of each input channel (k / group_size unless act-order)
//   W[n, k] = scales[g, n] * (q[k, n] - zero[g, n]),  g = g_idx[k],
//   zero = stored + 1 for the v1 serialization (checkpoint_format "gptq"), stored for gptq_v2.
//
// AWQ (AutoAWQ GEMM packing, `quant_method: awq`, `version: gemm`):
//   qweight  I32 [K, N/8]   packed along N in the order [0, 2, 4, 6, 1, 3, 5, 7]: nibble i of
//                           word c holds output channel 8c + kAwqOrder[i]
//   qzeros   I32 [G, N/8]   the same interleaving
//   scales   F16 [G, N]
//   W[n, k] = scales[k / group_size, n] * (q[k, n] - zero[k / group_size, n])
//
// Act-order (GPTQ desc_act) groups are scattered over K; the repacked matrix stores columns
// sorted by group (stable) and records that permutation, so each 32-block has one group.
#pragma once

#include <cstdint>
#include <string>

#include "model/model_files.h"
#include "model/quantization_config.h"
#include "pagoda/status.h"
#include "quant/quantized_matrix.h"

namespace pagoda::quant {

/// A GPTQ or AWQ layer's tensors (g_idx: GPTQ only, nullptr when absent).
struct Int4CheckpointTensors {
  const ModelTensor* qweight = nullptr;
  const ModelTensor* qzeros = nullptr;
  const ModelTensor* scales = nullptr;
  const ModelTensor* g_idx = nullptr;
};

/// Repacks the GPTQ layer `name` (for errors, e.g. "model.layers.0.mlp.up_proj") of shape
/// [rows, cols] into Q4_Z.
StatusOr<QuantizedMatrix> repack_gptq(const std::string& name, const Int4CheckpointTensors& t,
                                      const QuantizationConfig& config, std::int64_t rows,
                                      std::int64_t cols);

/// Repacks the AWQ (GEMM) layer `name` of shape [rows, cols] into Q4_Z.
StatusOr<QuantizedMatrix> repack_awq(const std::string& name, const Int4CheckpointTensors& t,
                                     const QuantizationConfig& config, std::int64_t rows,
                                     std::int64_t cols);

}  // namespace pagoda::quant
