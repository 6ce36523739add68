// ModelConfig and GenerationDefaults from a Hugging Face checkpoint's config.json and
// generation_config.json (transformers 4.x and 5.x spellings). Keys the file leaves out take
// the defaults of the architecture's transformers config class (architecture_config.h).
#pragma once

#include <string>
#include <string_view>

#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda {

/// Parses config.json text; `path` names the file in errors.
StatusOr<ModelConfig> model_config_from_hf_json(std::string_view text, const std::string& path);

/// Parses generation_config.json text into defaults and merges its bos/eos ids into `config`.
StatusOr<GenerationDefaults> generation_defaults_from_hf_json(std::string_view text,
                                                              const std::string& path,
                                                              ModelConfig& config);

}  // namespace pagoda
