// A registry model's weights on the GPU. Q, K and V are one [q + k + v, hidden] linear layer and
// gate and up one [2 * intermediate, hidden] layer, so each is a single product. Each linear
// layer takes the form its host weights allow (device_linear_plan.h): GPTQ / AWQ / int4 and
// GGUF Q4_0 stay 4-bit (W4A16), per-channel FP8 stays FP8, the rest (and every matrix of an FP32
// run) is dense in the activation dtype (BF16, FP16 or FP32), decoded exactly and rounded once.
// The embedding and the LM head are held as linear layers too: a GGUF or 4-bit table keeps its
// W4A16 form (rows dequantized per lookup, the LM head through the W4A16 kernel with fp32
// logits), so a GGUF model takes about its file's size; other tables are dense. Norms are always
// in the activation dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "kernels/rope/rope_kv_cache.h"
#include "models/cuda_gemma3_weights.h"
#include "models/cuda_linear_layer.h"
#include "models/llama_weights.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"
#include "quant/load_time_quantization.h"

namespace pagoda::models {

/// One decoder layer on the device.
struct CudaLayerWeights {
  cuda::DeviceBuffer input_layernorm;           ///< [hidden]
  CudaLinearLayer qkv_proj;                     ///< [(heads + 2 * kv_heads) * head_dim, hidden]
  cuda::DeviceBuffer qkv_bias;                  ///< [(heads + 2 * kv_heads) * head_dim] or empty
  cuda::DeviceBuffer q_norm;                    ///< [head_dim] or empty (Architecture::qk_norm)
  cuda::DeviceBuffer k_norm;                    ///< [head_dim] or empty
  CudaLinearLayer o_proj;                       ///< [hidden, heads * head_dim]
  cuda::DeviceBuffer post_attention_layernorm;  ///< [hidden]
  CudaLinearLayer gate_up_proj;                 ///< [2 * intermediate, hidden]: gate rows, up rows
  CudaLinearLayer down_proj;                    ///< [hidden, intermediate]
  /// An FP8 KV cache holds e4m3(k / k_cache_scale) and e4m3(v / v_cache_scale) for this layer
  /// (LlamaLayerWeights::k_scale, v_scale: the checkpoint's, or 1).
  float k_cache_scale = 1.0f;
  float v_cache_scale = 1.0f;

  /// The layer's linear layers, for sizing and reporting.
  std::vector<const CudaLinearLayer*> linear_layers() const {
    return {&qkv_proj, &o_proj, &gate_up_proj, &down_proj};
  }
};

/// The whole model on the device.
struct CudaLlamaWeights {
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
  CudaLinearLayer embed_tokens;  ///< [vocab, hidden]: rows looked up by gather_rows
  std::vector<CudaLayerWeights> layers;
  cuda::DeviceBuffer norm;      ///< [hidden]
  CudaLinearLayer lm_head;      ///< [vocab, hidden]; empty (0 rows) when tied: embed_tokens
  cuda::DeviceBuffer inv_freq;  ///< [head_dim / 2], fp32
  kernels::RopeStyle rope_style = kernels::RopeStyle::kRotateHalf;
  CudaGemma3Weights gemma3;  ///< Gemma 3's sandwich norms and local RoPE table; else empty

  /// The LM head (the embedding when tied).
  const CudaLinearLayer& lm_head_layer() const {
    return lm_head.rows() > 0 ? lm_head : embed_tokens;
  }
  /// Device bytes of every weight.
  std::size_t device_bytes() const;
  /// "4 w4a16 + 4 dense linear layers, w8a16 embedding and LM head, 1.23 GiB of weights": what
  /// the weights became on the device (the tables named only when not dense).
  std::string summary() const;
};

/// Copies host weights to the device: linear layers in the form device_linear_kind picks for
/// them, everything else (any stored type, decoded row by row) in `dtype`.
StatusOr<CudaLlamaWeights> upload_llama_weights(const ModelConfig& config,
                                                const LlamaWeights& weights,
                                                cuda::ScalarType dtype);

/// Random weights of the config's real shapes, made on the device (`--load-format dummy`):
/// matrices uniform in +-1/sqrt(fan_in), norm weights near 1, biases small. With
/// `quantization` fp8 or int4 the decoder layers' linear layers are instead the host's
/// quantized_dummy_linear (the CPU executor's very weights), drawn, quantized and uploaded one
/// layer at a time as FP8 W8A8 / W4A16 layers, so no bf16 copy of them is ever on the device.
StatusOr<CudaLlamaWeights> dummy_llama_weights(
    const ModelConfig& config, cuda::ScalarType dtype, std::uint64_t seed,
    quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone);

}  // namespace pagoda::models
