// Gemma 3's layer loop (transformers' Gemma3ForCausalLM, text only).
#pragma once

#include "models/decoder_ops.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Embedding to final norm over `ops`.
Status gemma3_forward(DecoderOps& ops, const ModelConfig& config);

}  // namespace pagoda::models
