// Qwen3 (dense): Llama's pre-norm decoder with a per-head RMSNorm of q and k
// (q_norm, k_norm over head_dim) between the projection and RoPE, no QKV bias,
// and head_dim set by the config rather than hidden / heads.
#pragma once

#include "models/decoder_ops.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Runs the model from the embedding to the final norm (DecoderOps' `normed`).
Status qwen3_forward(DecoderOps& ops, const ModelConfig& config);

}  // namespace pagoda::models
