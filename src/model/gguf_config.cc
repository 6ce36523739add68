#include "model/gguf_config.h"

#include <algorithm>
#include <string>

#include "model/architecture_config.h"

namespace pagoda {

namespace {

// Typed reads of `<arch>.<name>` keys with errors that name the key and the file.
class GgufKeys {
 public:
  GgufKeys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string key(const std::string& name) const { return arch_ + "." + name; }

  StatusOr<std::optional<std::int64_t>> optional_int(const std::string& k) const {
    const GgufValue* v = file_.find(k);
    if (v == nullptr) return std::optional<std::int64_t>();
    if (v->is_array()) {
      return unimplemented(file_.path() + ": " + k +
                           " is a per-layer array; models whose layers differ in shape are not "
                           "supported");
    }
    std::optional<std::int64_t> i = v->as_int();
    if (!i) return wrong_type(k, "an integer", *v);
    return i;
  }

  StatusOr<std::int64_t> required_int(const std::string& k) const {
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> i, optional_int(k));
    if (!i) return missing(k);
    return *i;
  }

  StatusOr<std::optional<double>> optional_float(const std::string& k) const {
    const GgufValue* v = file_.find(k);
    if (v == nullptr) return std::optional<double>();
    std::optional<double> d = v->as_float();
    if (!d) return wrong_type(k, "a number", *v);
    return d;
  }

  StatusOr<std::optional<std::string>> optional_string(const std::string& k) const {
    const GgufValue* v = file_.find(k);
    if (v == nullptr) return std::optional<std::string>();
    std::optional<std::string_view> s = v->as_string();
    if (!s) return wrong_type(k, "a string", *v);
    return std::optional<std::string>(std::string(*s));
  }

  Status missing(const std::string& k) const {
    return invalid_argument(file_.path() + ": metadata key " + k +
                            " is missing; the file is not a complete " + arch_ +
                            " model (a vocab-only GGUF cannot be served)");
  }

  Status wrong_type(const std::string& k, const std::string& want, const GgufValue& v) const {
    return invalid_argument(file_.path() + ": metadata key " + k + " must be " + want + ", not " +
                            std::string(gguf_value_type_name(v.type)) + "; the file is corrupt");
  }

 private:
  const GgufFile& file_;
  std::string arch_;
};

StatusOr<RopeScaling> read_rope_scaling(const GgufFile& file, const GgufKeys& keys) {
  RopeScaling scaling;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> type,
                          keys.optional_string(keys.key("rope.scaling.type")));
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> factor,
                          keys.optional_float(keys.key("rope.scaling.factor")));
  // Older conversions wrote only a linear factor.
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> linear,
                          keys.optional_float(keys.key("rope.scale_linear")));
  if (!type && linear && *linear != 1.0) {
    type = "linear";
    factor = linear;
  }
  if (!type || *type == "none") return scaling;
  if (*type == "linear") {
    scaling.type = RopeScalingType::kLinear;
  } else if (*type == "yarn") {
    scaling.type = RopeScalingType::kYarn;
  } else {
    return unimplemented(file.path() + ": RoPE scaling type '" + *type +
                         "' is not supported (none, linear and yarn are)");
  }
  scaling.factor = factor.value_or(1.0);
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> original,
                          keys.optional_int(keys.key("rope.scaling.original_context_length")));
  scaling.original_max_position_embeddings = original.value_or(0);
  return scaling;
}

// Interleaved sliding-window and full layers (Gemma 3). The GGUF stores only the window;
// llama.cpp fixes the rest by architecture (Gemma 3: 5 sliding layers then 1 full, local RoPE base
// 10000, its score scale from the shape), and so do we from the registry, reading the keys newer
// files carry.
Status read_interleaved_attention(const GgufFile& file, const GgufKeys& keys,
                                  const InterleavedAttentionDefaults& defaults,
                                  ModelConfig& config) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> window,
                          keys.optional_int(keys.key("attention.sliding_window")));
  if (!window) return keys.missing(keys.key("attention.sliding_window"));
  config.sliding_window = *window;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> pattern,
                          keys.optional_int(keys.key("attention.sliding_window_pattern")));
  const std::int64_t every = pattern.value_or(defaults.sliding_window_pattern);
  if (every <= 0) {
    return invalid_argument(
        file.path() + ": metadata key " + keys.key("attention.sliding_window_pattern") +
        " must be positive, not " + std::to_string(every) + "; the file is corrupt");
  }
  config.layer_types.resize(static_cast<std::size_t>(config.num_hidden_layers));
  for (std::size_t i = 0; i < config.layer_types.size(); ++i) {
    config.layer_types[i] = (i + 1) % static_cast<std::size_t>(every) == 0
                                ? AttentionType::kFull
                                : AttentionType::kSliding;
  }
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> local_theta,
                          keys.optional_float(keys.key("rope.freq_base_swa")));
  config.rope_local_theta = local_theta.value_or(defaults.rope_local_theta);
  config.query_pre_attn_scalar = defaults.gguf_query_pre_attn_scalar(config);
  return {};
}

// The id of `token` in the GGUF vocabulary, if it has the token.
std::optional<std::int64_t> token_id(const GgufFile& file, std::string_view token) {
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || !tokens->is_array()) return std::nullopt;
  for (std::size_t i = 0; i < tokens->array_size(); ++i) {
    if (tokens->element(i).as_string() == std::optional<std::string_view>(token)) {
      return static_cast<std::int64_t>(i);
    }
  }
  return std::nullopt;
}

}  // namespace

StatusOr<ModelConfig> model_config_from_gguf(const GgufFile& file) {
  ModelConfig config;
  std::optional<std::string> arch = file.get_string("general.architecture");
  if (!arch || arch->empty()) {
    return invalid_argument(file.path() +
                            ": general.architecture is missing or not a string; the file is not "
                            "a GGUF model");
  }
  config.architecture = *arch;
  const ArchitectureConfig& arch_config = architecture_config(*arch);
  const GgufKeys keys(file, *arch);
  PAGODA_ASSIGN_OR_RETURN(config.num_hidden_layers, keys.required_int(keys.key("block_count")));
  PAGODA_ASSIGN_OR_RETURN(config.hidden_size, keys.required_int(keys.key("embedding_length")));
  PAGODA_ASSIGN_OR_RETURN(config.intermediate_size,
                          keys.required_int(keys.key("feed_forward_length")));
  PAGODA_ASSIGN_OR_RETURN(config.num_attention_heads,
                          keys.required_int(keys.key("attention.head_count")));
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> kv_heads,
                          keys.optional_int(keys.key("attention.head_count_kv")));
  config.num_key_value_heads = kv_heads.value_or(config.num_attention_heads);
  PAGODA_ASSIGN_OR_RETURN(config.max_position_embeddings,
                          keys.required_int(keys.key("context_length")));

  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> key_length,
                          keys.optional_int(keys.key("attention.key_length")));
  if (key_length) {
    config.head_dim = *key_length;
  } else if (config.num_attention_heads > 0) {
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> rope_dims,
                          keys.optional_int(keys.key("rope.dimension_count")));
  if (rope_dims && *rope_dims != config.head_dim) {
    return unimplemented(file.path() + ": " + keys.key("rope.dimension_count") + " is " +
                         std::to_string(*rope_dims) + " but the head dimension is " +
                         std::to_string(config.head_dim) +
                         "; partial rotary embeddings are not supported");
  }

  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> vocab,
                          keys.optional_int(keys.key("vocab_size")));
  if (!vocab) {
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (tokens != nullptr && tokens->is_array()) {
      vocab = static_cast<std::int64_t>(tokens->array_size());
    }
  }
  if (!vocab) return keys.missing(keys.key("vocab_size") + " (and tokenizer.ggml.tokens)");
  config.vocab_size = *vocab;

  PAGODA_ASSIGN_OR_RETURN(std::optional<double> eps,
                          keys.optional_float(keys.key("attention.layer_norm_rms_epsilon")));
  if (!eps) return keys.missing(keys.key("attention.layer_norm_rms_epsilon"));
  config.rms_norm_eps = *eps;
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> theta,
                          keys.optional_float(keys.key("rope.freq_base")));
  config.rope_theta = theta.value_or(10000.0);
  PAGODA_ASSIGN_OR_RETURN(config.rope_scaling, read_rope_scaling(file, keys));
  if (arch_config.interleaved_attention) {
    PAGODA_RETURN_IF_ERROR(
        read_interleaved_attention(file, keys, *arch_config.interleaved_attention, config));
  }

  config.tie_word_embeddings = file.find_tensor("output.weight") == nullptr;
  config.attention_bias = file.find_tensor("blk.0.attn_q.bias") != nullptr;

  PAGODA_ASSIGN_OR_RETURN(config.bos_token_id, keys.optional_int("tokenizer.ggml.bos_token_id"));
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"}) {
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> id, keys.optional_int(k));
    if (id && std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), *id) ==
                  config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(*id);
    }
  }
  // Gemma's chat turns end with <end_of_turn>, which its GGUF files do not list as EOS
  // (tokenizer.ggml.eos_token_id is <eos> only): the instruction-tuned checkpoints' own
  // generation_config.json stops on both (eos_token_id [1, 106]), which is what vLLM stops on,
  // and llama.cpp adds the token to its end-of-generation set by its text.
  if (!arch_config.gguf_end_of_turn_token.empty()) {
    const std::optional<std::int64_t> end_of_turn =
        token_id(file, arch_config.gguf_end_of_turn_token);
    if (end_of_turn && std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(),
                                 *end_of_turn) == config.eos_token_ids.end()) {
      config.eos_token_ids.push_back(*end_of_turn);
    }
  }
  Status valid = config.validate();
  if (!valid.ok()) return Status(valid.code(), file.path() + ": " + valid.message());
  return config;
}

}  // namespace pagoda
