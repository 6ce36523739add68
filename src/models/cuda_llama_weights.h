// A registry model's weights on the GPU, in one activation dtype (BF16, FP16 or FP32). Q, K
// and V are concatenated into one [q + k + v, hidden] matrix and gate and up into one
// [2 * intermediate, hidden] matrix, so each is a single GEMM. Quantized GGUF tensors are
// dequantized at load (native quantized kernels come with the quantization issue).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "kernels/rope/rope_kv_cache.h"
#include "models/llama_weights.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// One decoder layer on the device.
struct CudaLayerWeights {
  cuda::DeviceBuffer input_layernorm;           ///< [hidden]
  cuda::DeviceBuffer qkv_proj;                  ///< [(heads + 2 * kv_heads) * head_dim, hidden]
  cuda::DeviceBuffer qkv_bias;                  ///< [(heads + 2 * kv_heads) * head_dim] or empty
  cuda::DeviceBuffer q_norm;                    ///< [head_dim] or empty (Architecture::qk_norm)
  cuda::DeviceBuffer k_norm;                    ///< [head_dim] or empty
  cuda::DeviceBuffer o_proj;                    ///< [hidden, heads * head_dim]
  cuda::DeviceBuffer post_attention_layernorm;  ///< [hidden]
  cuda::DeviceBuffer gate_up_proj;              ///< [2 * intermediate, hidden]: gate rows, up rows
  cuda::DeviceBuffer down_proj;                 ///< [hidden, intermediate]
};

/// The whole model on the device.
struct CudaLlamaWeights {
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;
  cuda::DeviceBuffer embed_tokens;  ///< [vocab, hidden]
  std::vector<CudaLayerWeights> layers;
  cuda::DeviceBuffer norm;      ///< [hidden]
  cuda::DeviceBuffer lm_head;   ///< [vocab, hidden]; empty when tied (use embed_tokens)
  cuda::DeviceBuffer inv_freq;  ///< [head_dim / 2], fp32
  kernels::RopeStyle rope_style = kernels::RopeStyle::kRotateHalf;

  /// The LM head matrix (the embedding when tied).
  const void* lm_head_data() const {
    return lm_head.data() != nullptr ? lm_head.data() : embed_tokens.data();
  }
};

/// Copies host weights (any stored type, decoded row by row) to the device in `dtype`.
StatusOr<CudaLlamaWeights> upload_llama_weights(const ModelConfig& config,
                                                const LlamaWeights& weights,
                                                cuda::ScalarType dtype);

/// Random weights of the config's real shapes, made on the device (`--load-format dummy`):
/// matrices uniform in +-1/sqrt(fan_in), norm weights near 1, biases small.
StatusOr<CudaLlamaWeights> dummy_llama_weights(const ModelConfig& config, cuda::ScalarType dtype,
                                               std::uint64_t seed);

}  // namespace pagoda::models
