// The Llama-family decoder (Llama 2/3, SmolLM2, Mistral, Qwen2/2.5) as one layer loop over a
// backend's DecoderOps: pre-norm attention with RoPE and a paged KV cache, pre-norm SwiGLU MLP,
// final norm.
#pragma once

#include "models/decoder_ops.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Runs the model from the embedding to the final norm (DecoderOps' `normed`).
Status llama_forward(DecoderOps& ops, const ModelConfig& config);

}  // namespace pagoda::models
