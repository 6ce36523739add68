// load_tokenizer_json: a Hugging Face tokenizer.json (+ optional tokenizer_config.json) to a
// BpeTokenizer. JSON errors and wrong shapes become INVALID_ARGUMENT naming the file.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/mapped_file.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/tokenizer_json_components.h"

namespace pagoda {
namespace {

using nlohmann::json;

StatusOr<json> parse_json(std::string_view text, const std::string& source) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(source + ": not valid JSON (" + e.what() +
                            "); re-export it with save_pretrained");
  }
}

StatusOr<std::unique_ptr<BpeModel>> parse_model(const json& model, bool byte_level,
                                                const std::string& source) {
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    return unimplemented(source + ": model type \"" + type +
                         "\" is not supported; Pagoda supports BPE tokenizers (byte-level like "
                         "GPT-2, Llama 3, Qwen2, or SentencePiece-style like Llama 2)");
  }
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0) {
    return unimplemented(source + ": BPE dropout is a training feature; set model.dropout to null");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      return unimplemented(source + ": model." + key + " is not supported");
    }
  }
  BpeModelConfig config;
  config.byte_level = byte_level;
  config.byte_fallback = model.value("byte_fallback", false);
  config.ignore_merges = model.value("ignore_merges", false);
  config.fuse_unk = model.value("fuse_unk", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    config.unk_token = model["unk_token"].get<std::string>();
  }
  const json& vocab = model.at("vocab");
  if (!vocab.is_object()) return invalid_argument(source + ": model.vocab must be an object");
  for (const auto& [piece, id] : vocab.items()) config.vocab.emplace(piece, id.get<std::int32_t>());
  for (const json& merge : model.at("merges")) {
    if (merge.is_array() && merge.size() == 2) {
      config.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::string line = merge.get<std::string>();
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return invalid_argument(source + ": merge \"" + line +
                              "\" must be two tokens separated by one space");
    }
    config.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return BpeModel::create(std::move(config), source);
}

std::vector<AddedToken> parse_added_tokens(const json& root) {
  std::vector<AddedToken> tokens;
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return tokens;
  for (const json& t : root["added_tokens"]) {
    tokens.push_back({t.at("id").get<std::int32_t>(), t.at("content").get<std::string>(),
                      t.value("special", false), t.value("lstrip", false), t.value("rstrip", false),
                      t.value("normalized", false), t.value("single_word", false)});
  }
  return tokens;
}

// A special-token entry of tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> config_token(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& value = config[key];
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content")) return value["content"].get<std::string>();
  return std::nullopt;
}

Status apply_config(const json& config, const std::string& config_path, TokenizerParts& parts) {
  auto lookup = [&](const char* key) -> StatusOr<std::optional<std::int32_t>> {
    const auto text = config_token(config, key);
    if (!text) return std::optional<std::int32_t>();
    auto id = parts.added.find(*text);
    if (!id) id = parts.model->piece_to_id(*text);
    if (!id) {
      return invalid_argument(config_path + ": " + key + " \"" + *text +
                              "\" is not in the tokenizer's vocabulary");
    }
    return id;
  };
  PAGODA_ASSIGN_OR_RETURN(parts.bos_id, lookup("bos_token"));
  PAGODA_ASSIGN_OR_RETURN(parts.eos_id, lookup("eos_token"));
  PAGODA_ASSIGN_OR_RETURN(parts.pad_id, lookup("pad_token"));
  // transformers rebuilds the post-processor from these flags when a config sets them.
  const bool has_bos_flag =
      config.contains("add_bos_token") && config["add_bos_token"].is_boolean();
  const bool has_eos_flag =
      config.contains("add_eos_token") && config["add_eos_token"].is_boolean();
  if (has_bos_flag || has_eos_flag) {
    const bool add_bos = has_bos_flag ? config["add_bos_token"].get<bool>() : false;
    const bool add_eos = has_eos_flag ? config["add_eos_token"].get<bool>() : false;
    if ((add_bos && !parts.bos_id) || (add_eos && !parts.eos_id)) {
      return invalid_argument(config_path +
                              ": add_bos_token/add_eos_token is set but the config "
                              "names no bos_token/eos_token");
    }
    parts.prefix_ids.clear();
    parts.suffix_ids.clear();
    if (add_bos) parts.prefix_ids.push_back(*parts.bos_id);
    if (add_eos) parts.suffix_ids.push_back(*parts.eos_id);
  }
  return Status::ok_status();
}

StatusOr<std::unique_ptr<Tokenizer>> build(const json& root, const json& config,
                                           const std::string& path,
                                           const std::string& config_path) {
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    return invalid_argument(path +
                            ": no \"model\" object; expected a tokenizer.json written by "
                            "Hugging Face tokenizers");
  }
  TokenizerParts parts;
  PAGODA_ASSIGN_OR_RETURN(parts.normalizer,
                          parse_normalizer(root.value("normalizer", json()), path));
  PAGODA_ASSIGN_OR_RETURN(parts.pre_tokenizer,
                          parse_pre_tokenizer(root.value("pre_tokenizer", json()), path));
  PAGODA_ASSIGN_OR_RETURN(parts.model,
                          parse_model(root["model"], parts.pre_tokenizer.byte_level(), path));
  PAGODA_ASSIGN_OR_RETURN(parts.decoder, parse_decoder(root.value("decoder", json()), path));
  PAGODA_RETURN_IF_ERROR(parse_post_processor(root.value("post_processor", json()), path,
                                              parts.prefix_ids, parts.suffix_ids));
  parts.added = AddedVocabulary(parse_added_tokens(root), parts.normalizer);
  if (!config.is_null()) PAGODA_RETURN_IF_ERROR(apply_config(config, config_path, parts));
  PAGODA_ASSIGN_OR_RETURN(auto tokenizer, BpeTokenizer::create(std::move(parts), path));
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace

StatusOr<std::unique_ptr<Tokenizer>> parse_tokenizer_json(
    std::string_view tokenizer_json, const std::string& source,
    std::optional<std::string_view> tokenizer_config_json, const std::string& config_source) {
  PAGODA_ASSIGN_OR_RETURN(json root, parse_json(tokenizer_json, source));
  json config;
  if (tokenizer_config_json) {
    PAGODA_ASSIGN_OR_RETURN(config, parse_json(*tokenizer_config_json, config_source));
  }
  try {
    return build(root, config, source, config_source);
  } catch (const json::exception& e) {
    return invalid_argument(source + ": unexpected structure (" + e.what() +
                            "); is this a tokenizer.json from Hugging Face tokenizers?");
  }
}

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer_json(const std::string& tokenizer_json_path,
                                                         const std::string& tokenizer_config_path) {
  PAGODA_ASSIGN_OR_RETURN(const std::string text, read_text_file(tokenizer_json_path));
  std::optional<std::string> config;
  if (!tokenizer_config_path.empty()) {
    PAGODA_ASSIGN_OR_RETURN(config, read_text_file(tokenizer_config_path));
  }
  return parse_tokenizer_json(text, tokenizer_json_path, config, tokenizer_config_path);
}

}  // namespace pagoda
