#include "model/inspect.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <nlohmann/json.hpp>

#include "common/mapped_file.h"

namespace pagoda {

namespace {

using nlohmann::json;

// The kind of a tokenizer.json pre-tokenizer: its type, or the types of a Sequence's parts.
std::string pre_tokenizer_kind(const json& pre) {
  if (!pre.is_object()) return "none";
  const std::string type = pre.value("type", std::string("?"));
  if (type != "Sequence" || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array()) {
    return type;
  }
  std::string parts;
  for (const json& p : pre["pretokenizers"]) {
    if (!parts.empty()) parts += ", ";
    parts += p.is_object() ? p.value("type", std::string("?")) : std::string("?");
  }
  return "Sequence[" + parts + "]";
}

StatusOr<std::string> tokenizer_kind(const ModelFiles& files) {
  if (files.gguf != nullptr) {
    return files.gguf->get_string("tokenizer.ggml.model").value_or("none") + " (pre-tokenizer " +
           files.gguf->get_string("tokenizer.ggml.pre").value_or("default") + ")";
  }
  if (files.tokenizer_json_path.empty()) return std::string("none (no tokenizer.json)");
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_text_file(files.tokenizer_json_path));
  const json tokenizer = json::parse(text, nullptr, false);
  if (tokenizer.is_discarded() || !tokenizer.is_object()) {
    return invalid_argument(files.tokenizer_json_path + ": not a valid JSON object");
  }
  const json model = tokenizer.value("model", json::object());
  const std::string type = model.is_object() ? model.value("type", std::string("?")) : "?";
  return type + " (pre-tokenizer " + pre_tokenizer_kind(tokenizer.value("pre_tokenizer", json())) +
         ")";
}

std::string shape_string(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string ids_string(const std::vector<std::int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

Status write_model_summary(const ModelFiles& files, std::ostream& out) {
  const ModelConfig& c = files.config;
  PAGODA_ASSIGN_OR_RETURN(std::string tokenizer, tokenizer_kind(files));
  const std::string format =
      files.gguf != nullptr
          ? fmt::format("GGUF v{}", files.gguf->version())
          : fmt::format("Hugging Face safetensors ({} file{})", files.safetensors.size(),
                        files.safetensors.size() == 1 ? "" : "s");
  std::string rope =
      fmt::format("{} (scaling {}", c.rope_theta, rope_scaling_type_name(c.rope_scaling.type));
  if (c.rope_scaling.type != RopeScalingType::kNone) {
    rope += fmt::format(", factor {}, original context {}", c.rope_scaling.factor,
                        c.rope_scaling.original_max_position_embeddings);
  }
  rope += ")";
  fmt::print(out, "model:              {}\n", files.path);
  fmt::print(out, "format:             {}\n", format);
  fmt::print(out, "architecture:       {}\n", c.architecture);
  fmt::print(out, "layers:             {}\n", c.num_hidden_layers);
  fmt::print(out, "hidden size:        {}\n", c.hidden_size);
  fmt::print(out, "intermediate size:  {}\n", c.intermediate_size);
  fmt::print(out, "attention heads:    {} (kv heads {}, head dim {})\n", c.num_attention_heads,
             c.num_key_value_heads, c.head_dim);
  fmt::print(out, "vocab size:         {}\n", c.vocab_size);
  fmt::print(out, "context length:     {}\n", c.max_position_embeddings);
  fmt::print(out, "rms norm eps:       {}\n", c.rms_norm_eps);
  fmt::print(out, "rope theta:         {}\n", rope);
  if (!c.layer_types.empty()) {
    std::string full;
    for (std::size_t i = 0; i < c.layer_types.size(); ++i) {
      if (c.layer_types[i] == AttentionType::kFull)
        full += (full.empty() ? "" : ",") + std::to_string(i);
    }
    fmt::print(out, "sliding window:     {} (full layers {}; local rope theta {})\n",
               c.sliding_window, full.empty() ? "none" : full,
               c.rope_local_theta.value_or(c.rope_theta));
  }
  if (c.query_pre_attn_scalar) {
    fmt::print(out, "query scale:        {}^-1/2\n", *c.query_pre_attn_scalar);
  }
  fmt::print(out, "tied embeddings:    {}\n", c.tie_word_embeddings ? "yes" : "no");
  fmt::print(out, "attention bias:     {}\n", c.attention_bias ? "yes" : "no");
  fmt::print(out, "bos / eos ids:      {} / {}\n",
             c.bos_token_id ? std::to_string(*c.bos_token_id) : "none",
             ids_string(c.eos_token_ids));
  if (!c.torch_dtype.empty()) fmt::print(out, "torch dtype:        {}\n", c.torch_dtype);
  if (files.quantization.method != QuantizationMethod::kNone) {
    fmt::print(out, "quantization:       {}\n", files.quantization.summary());
  }
  fmt::print(out, "tokenizer:          {}\n", tokenizer);
  fmt::print(out, "chat template:      {}\n",
             files.chat_template ? fmt::format("yes ({} chars)", files.chat_template->size())
                                 : std::string("no"));
  std::uint64_t parameters = 0;
  std::uint64_t bytes = 0;
  std::size_t name_width = 4;
  for (const ModelTensor& t : files.tensors) {
    parameters += t.num_elements();
    bytes += t.data.size();
    name_width = std::max(name_width, t.name.size());
  }
  fmt::print(out, "tensors:            {} ({} parameters, {} bytes)\n", files.tensors.size(),
             parameters, bytes);
  for (const ModelTensor& t : files.tensors) {
    fmt::print(out, "  {:<{}}  {:<7}  {}\n", t.name, name_width, dtype_name(t.dtype),
               shape_string(t.shape));
  }
  return {};
}

}  // namespace pagoda
