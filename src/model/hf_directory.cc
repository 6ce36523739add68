#include "model/hf_directory.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "common/mapped_file.h"
#include "model/hf_config.h"
#include "model/quantization_config.h"

namespace pagoda {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

StatusOr<json> read_json(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  json parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return invalid_argument(path + ": not a valid JSON object; fix or re-download it");
  }
  return parsed;
}

// Shard names come from an untrusted index; only plain file names inside the folder are allowed.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos &&
         name.find('\\') == std::string::npos && name != "." && name != "..";
}

StatusOr<std::vector<std::shared_ptr<const SafetensorsFile>>> open_shards(const std::string& dir) {
  const std::string single = join(dir, "model.safetensors");
  const std::string index_path = join(dir, "model.safetensors.index.json");
  std::vector<std::shared_ptr<const SafetensorsFile>> shards;
  if (!is_file(index_path)) {
    if (!is_file(single)) {
      return not_found(dir +
                       ": no model.safetensors or model.safetensors.index.json; only safetensors "
                       "checkpoints are supported (convert pytorch_model.bin, or pass a .gguf)");
    }
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(single));
    shards.push_back(std::move(file));
    return shards;
  }
  PAGODA_ASSIGN_OR_RETURN(json index, read_json(index_path));
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object()) {
    return invalid_argument(index_path + ": \"weight_map\" must be an object of tensor -> file");
  }
  std::map<std::string, std::size_t> shard_of_file;
  for (const auto& [tensor, file] : weight_map->items()) {
    if (!file.is_string() || !is_plain_file_name(file.get<std::string>())) {
      return invalid_argument(index_path + ": tensor '" + tensor +
                              "' must map to a file name inside the folder");
    }
    const std::string name = file.get<std::string>();
    if (shard_of_file.count(name) == 0) {
      const std::string shard_path = join(dir, name);
      if (!is_file(shard_path)) {
        return not_found(index_path + ": refers to shard " + name +
                         ", which is missing; download the complete checkpoint");
      }
      PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> shard,
                              SafetensorsFile::open(shard_path));
      shard_of_file[name] = shards.size();
      shards.push_back(std::move(shard));
    }
    if (shards[shard_of_file[name]]->find_tensor(tensor) == nullptr) {
      return data_loss(index_path + ": tensor '" + tensor + "' is not in its shard " + name +
                       "; the checkpoint is inconsistent");
    }
  }
  std::map<std::string, const SafetensorsFile*, std::less<>> owner;
  for (const auto& shard : shards) {
    for (const SafetensorsTensor& t : shard->tensors()) {
      auto [it, inserted] = owner.emplace(t.name, shard.get());
      if (!inserted) {
        return data_loss(index_path + ": tensor '" + t.name + "' is stored in both " +
                         it->second->path() + " and " + shard->path());
      }
    }
  }
  return shards;
}

StatusOr<std::optional<std::string>> read_chat_template(const std::string& dir,
                                                        const std::string& tokenizer_config) {
  const std::string jinja = join(dir, "chat_template.jinja");
  if (is_file(jinja)) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, read_text_file(jinja));
    return std::optional<std::string>(std::move(text));
  }
  if (tokenizer_config.empty()) return std::optional<std::string>();
  PAGODA_ASSIGN_OR_RETURN(json config, read_json(tokenizer_config));
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_array()) {
    for (const json& named : *it) {
      if (named.is_object() && named.value("name", json()) == "default" &&
          named.contains("template") && named["template"].is_string()) {
        return std::optional<std::string>(named["template"].get<std::string>());
      }
    }
    return std::optional<std::string>();
  }
  return invalid_argument(tokenizer_config +
                          ": \"chat_template\" must be a string or a list of {name, template}");
}

Status read_tokenizer_files(const std::string& dir, HfDirectory& out) {
  if (is_file(join(dir, "tokenizer.json"))) out.tokenizer_json_path = join(dir, "tokenizer.json");
  if (is_file(join(dir, "tokenizer_config.json"))) {
    out.tokenizer_config_path = join(dir, "tokenizer_config.json");
  }
  PAGODA_ASSIGN_OR_RETURN(out.chat_template, read_chat_template(dir, out.tokenizer_config_path));
  return Status::ok_status();
}

}  // namespace

StatusOr<HfDirectory> open_hf_directory(const std::string& dir, bool weights) {
  HfDirectory out;
  out.path = dir;
  const std::string config_path = join(dir, "config.json");
  PAGODA_ASSIGN_OR_RETURN(std::string config_text, read_text_file(config_path));
  PAGODA_ASSIGN_OR_RETURN(out.config, model_config_from_hf_json(config_text, config_path));
  PAGODA_ASSIGN_OR_RETURN(out.quantization,
                          quantization_config_from_hf_json(config_text, config_path));
  const std::string generation_path = join(dir, "generation_config.json");
  if (is_file(generation_path)) {
    PAGODA_ASSIGN_OR_RETURN(std::string text, read_text_file(generation_path));
    PAGODA_ASSIGN_OR_RETURN(out.generation,
                            generation_defaults_from_hf_json(text, generation_path, out.config));
  }
  if (weights) {
    PAGODA_ASSIGN_OR_RETURN(out.shards, open_shards(dir));
  }
  PAGODA_RETURN_IF_ERROR(read_tokenizer_files(dir, out));
  return out;
}

StatusOr<HfDirectory> open_hf_tokenizer_directory(const std::string& dir) {
  HfDirectory out;
  out.path = dir;
  PAGODA_RETURN_IF_ERROR(read_tokenizer_files(dir, out));
  return out;
}

}  // namespace pagoda
