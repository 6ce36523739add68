#include "model/model_files.h"

#include <filesystem>

#include "common/mapped_file.h"
#include "model/gguf_config.h"
#include "model/hf_config.h"
#include "model/hf_directory.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;

StatusOr<ModelFiles> open_gguf(const std::string& path) {
  ModelFiles files;
  files.format = ModelFormat::kGguf;
  files.path = path;
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::open(path));
  PAGODA_ASSIGN_OR_RETURN(files.config, model_config_from_gguf(*gguf));
  files.chat_template = gguf->get_string("tokenizer.chat_template");
  for (const GgufTensorInfo& t : gguf->tensors()) {
    files.tensors.push_back({t.name, t.dtype, {t.dims.rbegin(), t.dims.rend()}, t.data});
  }
  files.gguf = std::move(gguf);
  return files;
}

StatusOr<ModelFiles> open_hf(const std::string& path, bool weights = true) {
  PAGODA_ASSIGN_OR_RETURN(HfDirectory dir, open_hf_directory(path, weights));
  ModelFiles files;
  files.format = ModelFormat::kHuggingFace;
  files.path = path;
  files.config = std::move(dir.config);
  files.quantization = std::move(dir.quantization);
  files.generation = dir.generation;
  files.chat_template = std::move(dir.chat_template);
  files.tokenizer_json_path = std::move(dir.tokenizer_json_path);
  files.tokenizer_config_path = std::move(dir.tokenizer_config_path);
  for (const auto& shard : dir.shards) {
    for (const SafetensorsTensor& t : shard->tensors()) {
      files.tensors.push_back({t.name, t.dtype, t.shape, t.data});
    }
  }
  files.safetensors = std::move(dir.shards);
  return files;
}

}  // namespace

std::uint64_t ModelTensor::num_elements() const {
  std::uint64_t n = 1;
  for (std::uint64_t d : shape) n *= d;
  return n;
}

const ModelTensor* ModelFiles::find_tensor(std::string_view name) const {
  for (const ModelTensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

StatusOr<ModelFiles> open_model_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return not_found(path +
                     ": no such file or folder; pass a .gguf file or a Hugging Face model "
                     "folder");
  }
  if (fs::is_directory(status)) {
    if (!fs::is_regular_file(fs::path(path) / "config.json", ec)) {
      return invalid_argument("path " + path +
                              " is neither a .gguf file nor a folder with config.json");
    }
    return open_hf(path);
  }
  return open_gguf(path);
}

StatusOr<ModelFiles> open_model_config(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return not_found(path +
                     ": no such file or folder; pass a config.json file, a folder holding one, or "
                     "a .gguf file");
  }
  if (fs::is_directory(status)) {
    if (!fs::is_regular_file(fs::path(path) / "config.json", ec)) {
      return invalid_argument("path " + path + " is a folder without config.json");
    }
    return open_hf(path, /*weights=*/false);
  }
  if (fs::path(path).extension() != ".json") return open_gguf(path);
  ModelFiles files;
  files.format = ModelFormat::kHuggingFace;
  files.path = path;
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  PAGODA_ASSIGN_OR_RETURN(files.config, model_config_from_hf_json(text, path));
  return files;
}

StatusOr<ModelFiles> open_tokenizer_files(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return not_found(path +
                     ": no such file or folder; pass a .gguf file or a folder with "
                     "tokenizer.json");
  }
  if (!fs::is_directory(status)) return open_gguf(path);
  PAGODA_ASSIGN_OR_RETURN(HfDirectory dir, open_hf_tokenizer_directory(path));
  if (dir.tokenizer_json_path.empty()) {
    return not_found(path +
                     " has no tokenizer.json; pass a .gguf file or a folder with "
                     "tokenizer.json");
  }
  ModelFiles files;
  files.format = ModelFormat::kHuggingFace;
  files.path = path;
  files.chat_template = std::move(dir.chat_template);
  files.tokenizer_json_path = std::move(dir.tokenizer_json_path);
  files.tokenizer_config_path = std::move(dir.tokenizer_config_path);
  return files;
}

}  // namespace pagoda
