// A model's tokenizer, wherever the model keeps it: GGUF metadata or an HF folder's
// tokenizer.json. Shared by the CLI and the engine so both load it, and fail, the same way.
#pragma once

#include <memory>

#include "model/model_files.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"

namespace pagoda {

/// The tokenizer of a GGUF file (its metadata) or an HF folder (tokenizer.json); NOT_FOUND, saying
/// how to export one, for a folder without tokenizer.json.
StatusOr<std::unique_ptr<Tokenizer>> load_model_tokenizer(const ModelFiles& files);

}  // namespace pagoda
