// How a Hugging Face checkpoint's weights were quantized: config.json's `quantization_config`
// (GPTQ, AWQ, compressed-tensors FP8, "fp8" block-wise), checked once at open so that every
// unsupported variant is refused with the key that makes it so. What the tensors hold is read by
// the loaders in src/quant/; this only says how to read them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

/// The tool and serialization a checkpoint's quantized tensors follow.
enum class QuantizationMethod : std::uint8_t {
  kNone,                  ///< No quantization_config: weights as stored.
  kGptq,                  ///< `quant_method: gptq`: qweight / qzeros / scales / g_idx.
  kAwq,                   ///< `quant_method: awq`, GEMM packing: qweight / qzeros / scales.
  kCompressedTensorsFp8,  ///< `quant_method: compressed-tensors`, float8 weight + weight_scale.
  kFp8,                   ///< `quant_method: fp8`: float8 weight + weight_scale(_inv).
};

/// "none", "gptq", "awq", "compressed-tensors", "fp8".
std::string_view quantization_method_name(QuantizationMethod method);

/// How FP8 weight scales are shared.
enum class Fp8ScaleStrategy : std::uint8_t {
  kTensor,   ///< One scale per matrix.
  kChannel,  ///< One scale per output row: weight_scale [N, 1].
  kBlock,    ///< One scale per [block_rows, block_cols] tile: weight_scale(_inv) [N/br, K/bc].
};

/// A checkpoint's quantization, as config.json states it.
struct QuantizationConfig {
  QuantizationMethod method = QuantizationMethod::kNone;
  /// Bits per weight: 4 (GPTQ, AWQ) or 8 (FP8).
  int bits = 0;
  /// GPTQ/AWQ: input channels per scale and zero; -1 means one group over the whole row.
  std::int64_t group_size = -1;
  /// GPTQ `sym`: zeros are the midpoint 8 (still read from qzeros, which hold it).
  bool symmetric = true;
  /// GPTQ `desc_act` (act-order): input channels are grouped by g_idx, not by position.
  bool desc_act = false;
  /// GPTQ v1 serialization (`checkpoint_format: gptq`, the default) stores zero - 1 in qzeros.
  bool zeros_stored_minus_one = true;
  /// FP8 only.
  Fp8ScaleStrategy fp8_strategy = Fp8ScaleStrategy::kTensor;
  /// FP8 block strategy: [block_rows, block_cols].
  std::vector<std::int64_t> fp8_block_size;
  /// Module names (or compressed-tensors "re:" patterns) left unquantized, as config.json lists
  /// them (`ignore`, `modules_to_not_convert`); informational, the loader goes by the tensors
  /// each module actually stores.
  std::vector<std::string> ignored_modules;
  /// `kv_cache_scheme` (compressed-tensors, as llm-compressor writes it: 8-bit float, static,
  /// per tensor): the checkpoint calibrated an FP8 KV cache, and each attention block stores its
  /// `k_scale` / `v_scale`. With `--kv-cache-dtype auto` the CUDA backend then holds an FP8 cache.
  bool fp8_kv_cache = false;

  /// One line for `pagoda inspect`: "gptq 4-bit, group 128, asym, act-order".
  std::string summary() const;
  /// summary() without the KV cache: "compressed-tensors E4M3, per-channel scales".
  std::string weights_summary() const;
};

/// Reads `quantization_config` (or compressed-tensors' older `compression_config`) from
/// config.json text; method kNone when there is none. Unsupported variants are UNIMPLEMENTED
/// errors naming `path` and the key.
StatusOr<QuantizationConfig> quantization_config_from_hf_json(std::string_view text,
                                                              const std::string& path);

}  // namespace pagoda
