// Whatever a model path points at, a GGUF file or a Hugging Face folder, opened into one shape:
// the config, a uniform tensor list over the mapped bytes, the chat template and tokenizer files.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "model/gguf_file.h"
#include "model/quantization_config.h"
#include "model/safetensors_file.h"
#include "pagoda/model_config.h"
#include "pagoda/status.h"

namespace pagoda {

/// Which container the weights came in.
enum class ModelFormat : std::uint8_t { kGguf, kHuggingFace };

/// One stored tensor, whatever the container.
struct ModelTensor {
  /// As stored: "blk.0.attn_q.weight" in GGUF, "model.layers.0.self_attn.q_proj.weight" in HF.
  std::string name;
  DType dtype = DType::kF32;
  /// Outermost dimension first (row-major, as HF and numpy write it; GGUF's dims reversed).
  std::vector<std::uint64_t> shape;
  /// The bytes inside the mapping, valid while the ModelFiles lives.
  std::span<const std::uint8_t> data;

  /// Product of `shape`.
  std::uint64_t num_elements() const;
};

/// An opened model: the file mappings stay alive as long as this does.
struct ModelFiles {
  ModelFormat format = ModelFormat::kGguf;
  /// The path given to open_model_files().
  std::string path;
  ModelConfig config;
  /// HF only: how the checkpoint's linear weights are quantized (kNone for GGUF, whose
  /// quantization is each tensor's type).
  QuantizationConfig quantization;
  GenerationDefaults generation;
  /// In file order (GGUF) or shard then data order (HF).
  std::vector<ModelTensor> tensors;
  /// The Jinja chat template, when the model ships one.
  std::optional<std::string> chat_template;
  /// HF only: tokenizer.json and tokenizer_config.json paths, empty when absent.
  std::string tokenizer_json_path;
  std::string tokenizer_config_path;
  /// GGUF only: the parsed file, whose metadata also holds the tokenizer.
  std::shared_ptr<const GgufFile> gguf;
  /// HF only: the safetensors files the tensors point into.
  std::vector<std::shared_ptr<const SafetensorsFile>> safetensors;

  /// The tensor named `name`; nullptr when absent.
  const ModelTensor* find_tensor(std::string_view name) const;
};

/// Opens a .gguf file or a folder holding config.json.
StatusOr<ModelFiles> open_model_files(const std::string& path);

/// What --load-format dummy needs: the config without weights. `path` is an HF config.json file
/// (configs/models/*.json), a folder holding one (its tokenizer and chat template files are
/// found as open_model_files finds them; no safetensors needed), or a .gguf file (its tensors
/// are listed but unused). `tensors` is empty for the first two.
StatusOr<ModelFiles> open_model_config(const std::string& path);

/// Where a tokenizer and chat template come from (--tokenizer): a .gguf file (opened whole), or
/// a folder holding tokenizer.json (config.json and weights not needed; `config` stays empty).
/// NOT_FOUND for a missing path or a folder without tokenizer.json.
StatusOr<ModelFiles> open_tokenizer_files(const std::string& path);

}  // namespace pagoda
