#include "model/hf_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/architecture_config.h"
#include "model/json_fields.h"

namespace pagoda {

namespace {

using nlohmann::json;

// config.json's fields: the shared typed reads plus the keys a decoder config must have.
class HfFields : public JsonFields {
 public:
  using JsonFields::JsonFields;

  StatusOr<std::int64_t> required_int(const std::string& key) const {
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> v, optional_int(key));
    if (!v) return missing(key);
    return *v;
  }

  Status missing(const std::string& key) const {
    std::string names;
    for (const ArchitectureConfig& a : architecture_configs()) {
      names += (names.empty() ? "" : ", ") + std::string(a.name);
    }
    return invalid_argument(path() + ": required key \"" + key +
                            "\" is missing; is this a checkpoint of a decoder Pagoda runs (" +
                            names + ")?");
  }
};

StatusOr<json> parse_object(std::string_view text, const std::string& path) {
  json parsed = json::parse(text.begin(), text.end(), nullptr, false);
  if (parsed.is_discarded())
    return invalid_argument(path + ": not valid JSON; fix or re-download it");
  if (!parsed.is_object()) return invalid_argument(path + ": must hold a JSON object");
  return parsed;
}

void add_unique(std::vector<std::int64_t>& ids, const std::vector<std::int64_t>& more) {
  for (std::int64_t id : more) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
}

// transformers 4.x writes `rope_scaling` {"rope_type" or "type", "factor", ...} beside
// `rope_theta`; 5.x writes `rope_parameters` {"rope_type", "rope_theta", ...}. `default_theta`:
// the architecture's, when neither says.
Status read_rope(const json& root, const std::string& path, double default_theta,
                 ModelConfig& config) {
  const HfFields fields(root, path);
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> theta, fields.optional_float("rope_theta"));
  const json* params = fields.find("rope_parameters");
  if (params == nullptr) params = fields.find("rope_scaling");
  if (params != nullptr && !params->is_object()) {
    return invalid_argument(path + ": \"rope_scaling\" must be an object or null");
  }
  if (params != nullptr) {
    const HfFields rope(*params, path);
    PAGODA_ASSIGN_OR_RETURN(std::optional<double> inner_theta, rope.optional_float("rope_theta"));
    if (inner_theta) theta = inner_theta;
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> type, rope.optional_string("rope_type"));
    if (!type) {
      PAGODA_ASSIGN_OR_RETURN(type, rope.optional_string("type"));
    }
    RopeScaling& scaling = config.rope_scaling;
    if (!type || *type == "default") {
      scaling.type = RopeScalingType::kNone;
    } else if (*type == "linear") {
      scaling.type = RopeScalingType::kLinear;
    } else if (*type == "llama3") {
      scaling.type = RopeScalingType::kLlama3;
    } else if (*type == "yarn") {
      scaling.type = RopeScalingType::kYarn;
    } else {
      return unimplemented(path + ": rope_scaling type \"" + *type +
                           "\" is not supported (default, linear, llama3 and yarn are)");
    }
    if (scaling.type != RopeScalingType::kNone) {
      PAGODA_ASSIGN_OR_RETURN(std::optional<double> factor, rope.optional_float("factor"));
      PAGODA_ASSIGN_OR_RETURN(std::optional<double> low, rope.optional_float("low_freq_factor"));
      PAGODA_ASSIGN_OR_RETURN(std::optional<double> high, rope.optional_float("high_freq_factor"));
      PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> original,
                              rope.optional_int("original_max_position_embeddings"));
      if (!factor) return rope.missing("rope_scaling.factor");
      scaling.factor = *factor;
      scaling.low_freq_factor = low.value_or(scaling.low_freq_factor);
      scaling.high_freq_factor = high.value_or(scaling.high_freq_factor);
      scaling.original_max_position_embeddings = original.value_or(0);
    }
  }
  config.rope_theta = theta.value_or(default_theta);
  return {};
}

// Interleaved sliding-window and full layers, each kind with its own RoPE, and a score scale of
// their own (Gemma 3: model_type gemma3_text, or gemma3 when a text config is read alone). Absent
// keys take the architecture's defaults. transformers 5 writes `layer_types` and
// `rope_parameters` per layer type ({"full_attention": {...}, "sliding_attention": {...}});
// 4.x wrote `sliding_window_pattern`, `rope_theta` + `rope_scaling` (the full layers') and
// `rope_local_base_freq`.
Status read_interleaved_attention(const json& root, const std::string& path,
                                  const ArchitectureConfig& arch, ModelConfig& config) {
  const InterleavedAttentionDefaults& defaults = *arch.interleaved_attention;
  const HfFields f(root, path);
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> window, f.optional_int("sliding_window"));
  config.sliding_window = window.value_or(defaults.sliding_window);
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> scalar, f.optional_float("query_pre_attn_scalar"));
  config.query_pre_attn_scalar = scalar.value_or(defaults.query_pre_attn_scalar);
  PAGODA_ASSIGN_OR_RETURN(config.attn_logit_softcapping,
                          f.optional_float("attn_logit_softcapping"));
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> final_cap,
                          f.optional_float("final_logit_softcapping"));
  if (final_cap) {
    return unimplemented(path + ": final_logit_softcapping is not supported yet");
  }
  const json* types = f.find("layer_types");
  if (types != nullptr && !types->is_null()) {
    if (!types->is_array()) return invalid_argument(path + ": \"layer_types\" must be a list");
    for (const json& t : *types) {
      if (t == "sliding_attention") {
        config.layer_types.push_back(AttentionType::kSliding);
      } else if (t == "full_attention") {
        config.layer_types.push_back(AttentionType::kFull);
      } else {
        return invalid_argument(path + ": layer_types holds " + t.dump() +
                                "; expected \"sliding_attention\" or \"full_attention\"");
      }
    }
  } else {
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> pattern,
                            f.optional_int("sliding_window_pattern"));
    const std::int64_t every = pattern.value_or(defaults.sliding_window_pattern);
    if (every <= 0) return invalid_argument(path + ": sliding_window_pattern must be positive");
    for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) {
      config.layer_types.push_back((i + 1) % every == 0 ? AttentionType::kFull
                                                        : AttentionType::kSliding);
    }
  }
  const json* params = f.find("rope_parameters");
  if (params != nullptr && params->is_object() && params->contains("full_attention")) {
    json full = json::object();
    full["rope_parameters"] = (*params)["full_attention"];
    PAGODA_RETURN_IF_ERROR(read_rope(full, path, arch.rope_theta, config));
    const json& local = (*params).value("sliding_attention", json::object());
    const HfFields local_fields(local, path);
    PAGODA_ASSIGN_OR_RETURN(std::optional<double> local_theta,
                            local_fields.optional_float("rope_theta"));
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> local_type,
                            local_fields.optional_string("rope_type"));
    if (local_type && *local_type != "default") {
      return unimplemented(path + ": rope_type \"" + *local_type +
                           "\" on sliding layers is not supported (default is)");
    }
    config.rope_local_theta = local_theta.value_or(defaults.rope_local_theta);
    return {};
  }
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> local_theta,
                          f.optional_float("rope_local_base_freq"));
  config.rope_local_theta = local_theta.value_or(defaults.rope_local_theta);
  return {};
}

}  // namespace

// Mistral: config.json `sliding_window` applies to every layer; absent, the config class's
// default; null (Mistral 7B v0.2 on), full attention.
Status read_every_layer_sliding_window(const json& root, const std::string& path,
                                       std::int64_t default_window, ModelConfig& config) {
  const auto it = root.find("sliding_window");
  if (it != root.end() && it->is_null()) return Status::ok_status();
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> window,
                          HfFields(root, path).optional_int("sliding_window"));
  config.sliding_window = window.value_or(default_window);
  config.layer_types.assign(
      static_cast<std::size_t>(std::max<std::int64_t>(0, config.num_hidden_layers)),
      AttentionType::kSliding);
  return Status::ok_status();
}

StatusOr<ModelConfig> model_config_from_hf_json(std::string_view text, const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(json root, parse_object(text, path));
  const HfFields f(root, path);
  ModelConfig config;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> model_type, f.optional_string("model_type"));
  if (!model_type) return f.missing("model_type");
  config.architecture = *model_type;
  // What the file leaves out, the architecture's transformers config class decides.
  const ArchitectureConfig& arch = architecture_config(*model_type);
  PAGODA_ASSIGN_OR_RETURN(config.num_hidden_layers, f.required_int("num_hidden_layers"));
  PAGODA_ASSIGN_OR_RETURN(config.hidden_size, f.required_int("hidden_size"));
  PAGODA_ASSIGN_OR_RETURN(config.intermediate_size, f.required_int("intermediate_size"));
  PAGODA_ASSIGN_OR_RETURN(config.num_attention_heads, f.required_int("num_attention_heads"));
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> kv_heads,
                          f.optional_int("num_key_value_heads"));
  config.num_key_value_heads = kv_heads.value_or(config.num_attention_heads);
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> head_dim, f.optional_int("head_dim"));
  if (!head_dim) head_dim = arch.head_dim;
  if (head_dim) {
    config.head_dim = *head_dim;
  } else if (config.num_attention_heads > 0) {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  PAGODA_ASSIGN_OR_RETURN(config.vocab_size, f.required_int("vocab_size"));
  PAGODA_ASSIGN_OR_RETURN(config.max_position_embeddings,
                          f.required_int("max_position_embeddings"));
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> eps, f.optional_float("rms_norm_eps"));
  config.rms_norm_eps = eps.value_or(1e-6);
  PAGODA_RETURN_IF_ERROR(read_rope(root, path, arch.rope_theta, config));
  if (arch.interleaved_attention) {
    PAGODA_RETURN_IF_ERROR(read_interleaved_attention(root, path, arch, config));
  }
  if (arch.every_layer_sliding_window) {
    PAGODA_RETURN_IF_ERROR(
        read_every_layer_sliding_window(root, path, *arch.every_layer_sliding_window, config));
  }

  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> tie, f.optional_bool("tie_word_embeddings"));
  config.tie_word_embeddings = tie.value_or(arch.tie_word_embeddings);
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> bias, f.optional_bool("attention_bias"));
  config.attention_bias = arch.qkv_bias_always || bias.value_or(false);

  PAGODA_ASSIGN_OR_RETURN(config.bos_token_id, f.optional_int("bos_token_id"));
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::int64_t> eos, f.int_or_list("eos_token_id"));
  add_unique(config.eos_token_ids, eos);
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> dtype, f.optional_string("torch_dtype"));
  if (!dtype) {
    PAGODA_ASSIGN_OR_RETURN(dtype, f.optional_string("dtype"));
  }
  config.torch_dtype = dtype.value_or("");

  Status valid = config.validate();
  if (!valid.ok()) return Status(valid.code(), path + ": " + valid.message());
  return config;
}

StatusOr<GenerationDefaults> generation_defaults_from_hf_json(std::string_view text,
                                                              const std::string& path,
                                                              ModelConfig& config) {
  PAGODA_ASSIGN_OR_RETURN(json root, parse_object(text, path));
  const HfFields f(root, path);
  GenerationDefaults defaults;
  PAGODA_ASSIGN_OR_RETURN(defaults.temperature, f.optional_float("temperature"));
  PAGODA_ASSIGN_OR_RETURN(defaults.top_p, f.optional_float("top_p"));
  PAGODA_ASSIGN_OR_RETURN(defaults.top_k, f.optional_int("top_k"));
  PAGODA_ASSIGN_OR_RETURN(defaults.min_p, f.optional_float("min_p"));
  PAGODA_ASSIGN_OR_RETURN(defaults.repetition_penalty, f.optional_float("repetition_penalty"));
  PAGODA_ASSIGN_OR_RETURN(defaults.max_new_tokens, f.optional_int("max_new_tokens"));
  PAGODA_ASSIGN_OR_RETURN(defaults.do_sample, f.optional_bool("do_sample"));
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> bos, f.optional_int("bos_token_id"));
  if (bos && !config.bos_token_id) config.bos_token_id = bos;
  PAGODA_ASSIGN_OR_RETURN(std::vector<std::int64_t> eos, f.int_or_list("eos_token_id"));
  add_unique(config.eos_token_ids, eos);
  Status valid = config.validate();
  if (!valid.ok()) return Status(valid.code(), path + ": " + valid.message());
  return defaults;
}

}  // namespace pagoda
