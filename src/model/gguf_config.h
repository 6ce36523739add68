// ModelConfig from a GGUF file's `<arch>.*` and `tokenizer.ggml.*` metadata.
#pragma once

#include "model/gguf_file.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda {

/// Reads the hyperparameters of `file`; a missing or mistyped key is an error naming it.
StatusOr<ModelConfig> model_config_from_gguf(const GgufFile& file);

}  // namespace pagoda
