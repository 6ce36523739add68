// Gemma 3's weights on the GPU beyond the Llama layout of CudaLlamaWeights: each layer's
// pre/post-feedforward norms (post_attention_layernorm is the Llama slot) and the sliding
// layers' RoPE table. Empty for every other architecture.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"
#include "models/llama_weights.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// The sandwich norms of one layer.
struct CudaGemma3LayerWeights {
  cuda::DeviceBuffer pre_feedforward_layernorm;   ///< [hidden], dtype
  cuda::DeviceBuffer post_feedforward_layernorm;  ///< [hidden], dtype
};

/// What Gemma 3 adds to CudaLlamaWeights.
struct CudaGemma3Weights {
  std::vector<CudaGemma3LayerWeights> layers;  ///< empty unless Architecture::sandwich_norms
  cuda::DeviceBuffer local_inv_freq;           ///< [head_dim / 2], fp32; empty without a local base

  /// Device bytes of these weights.
  std::size_t device_bytes() const;
};

/// Copies the host's Gemma 3 weights (LlamaLayerWeights' pre/post-feedforward norms, already
/// offset by the loader, and rope_local_inv_freq) to the device in `dtype`; empty parts stay empty.
StatusOr<CudaGemma3Weights> upload_gemma3_weights(const ModelConfig& config,
                                                  const LlamaWeights& host, cuda::ScalarType dtype);

/// `--load-format dummy`: the sandwich norms uniform in [0.9, 1.1), drawn with seeds `next_seed`,
/// `next_seed + 1`, ... in the host's order (dummy_llama_weights draws them after every other
/// tensor: per layer pre then post), and the local RoPE table from the config.
StatusOr<CudaGemma3Weights> dummy_gemma3_weights(const ModelConfig& config, cuda::ScalarType dtype,
                                                 std::uint64_t next_seed);

}  // namespace pagoda::models
