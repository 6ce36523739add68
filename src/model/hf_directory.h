// A Hugging Face model folder: config.json, generation_config.json, weights in model.safetensors
// or in shards listed by model.safetensors.index.json, and the tokenizer and chat template files.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/quantization_config.h"
#include "model/safetensors_file.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda {

/// The opened contents of a Hugging Face model folder.
struct HfDirectory {
  std::string path;
  ModelConfig config;
  /// config.json's quantization_config; method kNone when absent.
  QuantizationConfig quantization;
  GenerationDefaults generation;
  /// model.safetensors, or the shards in the order the index first names them.
  std::vector<std::shared_ptr<const SafetensorsFile>> shards;
  /// chat_template.jinja, else tokenizer_config.json's `chat_template` (its "default" entry when
  /// it is a list of named templates).
  std::optional<std::string> chat_template;
  /// Paths of tokenizer.json and tokenizer_config.json; empty when the file is absent.
  std::string tokenizer_json_path;
  std::string tokenizer_config_path;
};

/// Opens the folder `dir`; every missing or malformed file is a Status naming it. Without
/// `weights` the safetensors files are neither required nor opened (--load-format dummy).
StatusOr<HfDirectory> open_hf_directory(const std::string& dir, bool weights = true);

/// The tokenizer files of `dir` only (tokenizer.json, tokenizer_config.json, the chat template),
/// as open_hf_directory finds them; no config.json needed (--tokenizer). `config` stays empty.
StatusOr<HfDirectory> open_hf_tokenizer_directory(const std::string& dir);

}  // namespace pagoda
