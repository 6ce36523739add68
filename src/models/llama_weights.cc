#include "models/llama_weights.h"

#include <cmath>
#include <cstring>
#include <string>

#include "models/linear_weights.h"
#include "models/weights.h"
#include "sampling/random_draw.h"

namespace pagoda::models {

namespace {

cpu::TensorView matrix_view(const ModelTensor& tensor) {
  return cpu::dense_view(tensor.data.data(), tensor.dtype,
                         static_cast<std::int64_t>(tensor.shape[0]),
                         static_cast<std::int64_t>(tensor.shape[1]));
}

StatusOr<cpu::TensorView> get_matrix(const Weights& w, std::string_view name, std::int64_t rows,
                                     std::int64_t cols) {
  PAGODA_ASSIGN_OR_RETURN(
      const ModelTensor* tensor,
      w.get(name, {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)}));
  return matrix_view(*tensor);
}

StatusOr<std::vector<float>> get_vector(const Weights& w, std::string_view name,
                                        std::int64_t size) {
  return w.get_f32(name, {static_cast<std::uint64_t>(size)});
}

StatusOr<LlamaLayerWeights> load_layer(const Weights& w, const ModelConfig& c,
                                       LinearWeightLoader& linear) {
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  LlamaLayerWeights layer;
  PAGODA_ASSIGN_OR_RETURN(layer.input_layernorm,
                          get_vector(w, "input_layernorm.weight", c.hidden_size));
  const Weights attn = w.pp("self_attn");
  PAGODA_ASSIGN_OR_RETURN(layer.q_proj, linear.load(attn, "q_proj", q_dim, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.k_proj, linear.load(attn, "k_proj", kv_dim, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.v_proj, linear.load(attn, "v_proj", kv_dim, c.hidden_size));
  if (c.attention_bias) {
    PAGODA_ASSIGN_OR_RETURN(layer.q_bias, get_vector(attn, "q_proj.bias", q_dim));
    PAGODA_ASSIGN_OR_RETURN(layer.k_bias, get_vector(attn, "k_proj.bias", kv_dim));
    PAGODA_ASSIGN_OR_RETURN(layer.v_bias, get_vector(attn, "v_proj.bias", kv_dim));
  }
  PAGODA_ASSIGN_OR_RETURN(layer.o_proj, linear.load(attn, "o_proj", c.hidden_size, q_dim));
  PAGODA_ASSIGN_OR_RETURN(layer.post_attention_layernorm,
                          get_vector(w, "post_attention_layernorm.weight", c.hidden_size));
  const Weights mlp = w.pp("mlp");
  PAGODA_ASSIGN_OR_RETURN(layer.gate_proj,
                          linear.load(mlp, "gate_proj", c.intermediate_size, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.up_proj,
                          linear.load(mlp, "up_proj", c.intermediate_size, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.down_proj,
                          linear.load(mlp, "down_proj", c.hidden_size, c.intermediate_size));
  return layer;
}

// The config's scaling as the RoPE op takes it (yarn, refused by the callers, maps to none).
cpu::RopeScaling cpu_rope_scaling(const RopeScaling& s) {
  cpu::RopeScaling out;
  out.factor = s.factor;
  out.low_freq_factor = s.low_freq_factor;
  out.high_freq_factor = s.high_freq_factor;
  out.original_max_position_embeddings = s.original_max_position_embeddings;
  out.type = s.type == RopeScalingType::kLinear   ? cpu::RopeScalingType::kLinear
             : s.type == RopeScalingType::kLlama3 ? cpu::RopeScalingType::kLlama3
                                                  : cpu::RopeScalingType::kNone;
  return out;
}

StatusOr<cpu::RopeScaling> rope_scaling(const ModelFiles& files) {
  const RopeScaling& s = files.config.rope_scaling;
  cpu::RopeScaling out = cpu_rope_scaling(s);
  switch (s.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kLinear: return out;
    case RopeScalingType::kLlama3:
      // A GGUF file carries llama3 scaling as the rope_freqs tensor instead (see below).
      out.type = files.format == ModelFormat::kGguf ? cpu::RopeScalingType::kNone
                                                    : cpu::RopeScalingType::kLlama3;
      if (out.type == cpu::RopeScalingType::kLlama3 && s.original_max_position_embeddings <= 0) {
        return invalid_argument(files.path +
                                ": llama3 rope scaling needs original_max_position_embeddings");
      }
      return out;
    case RopeScalingType::kYarn: break;
  }
  return unimplemented(files.path + ": rope scaling type \"" + rope_scaling_type_name(s.type) +
                       "\" is not supported yet");
}

// llama.cpp converts Llama and Mistral checkpoints with Q and K rows permuted so that RoPE
// rotates adjacent pairs; it leaves Qwen2 as HF wrote it (rotate-half).
cpu::RopeStyle rope_style(const ModelFiles& files) {
  const std::string& arch = files.config.architecture;
  if (files.format == ModelFormat::kGguf && (arch == "llama" || arch == "mistral")) {
    return cpu::RopeStyle::kAdjacentPairs;
  }
  return cpu::RopeStyle::kRotateHalf;
}

StatusOr<std::vector<float>> rope_inv_freq(const ModelFiles& files, const Weights& w) {
  const ModelConfig& c = files.config;
  PAGODA_ASSIGN_OR_RETURN(cpu::RopeScaling scaling, rope_scaling(files));
  std::vector<float> inv_freq = cpu::rope_inv_freq(c.head_dim, c.rope_theta, scaling);
  // llama.cpp's rope_freqs divides each frequency by its factor (Llama 3.1 scaling, precomputed).
  const auto half = static_cast<std::int64_t>(inv_freq.size());
  if (w.contains("rope_freqs.weight")) {
    PAGODA_ASSIGN_OR_RETURN(std::vector<float> factors, get_vector(w, "rope_freqs.weight", half));
    for (std::int64_t i = 0; i < half; ++i) inv_freq[i] /= factors[i];
  }
  return inv_freq;
}

}  // namespace

StatusOr<LlamaWeights> load_llama_weights(const ModelFiles& files,
                                          const LlamaLoadOptions& options) {
  const ModelConfig& c = files.config;
  PAGODA_RETURN_IF_ERROR(c.validate());
  if (options.quantization != quant::LoadTimeQuantization::kNone &&
      files.quantization.method != QuantizationMethod::kNone) {
    return invalid_argument(files.path + " is already quantized (" + files.quantization.summary() +
                            "); drop --quantization " +
                            std::string(quant::load_time_quantization_name(options.quantization)));
  }
  LinearWeightLoader linear(files, options.quantization);
  const std::string& arch = c.architecture;
  if (arch != "llama" && arch != "mistral" && arch != "qwen2") {
    return unimplemented(files.path + ": architecture \"" + arch +
                         "\" is not supported; Pagoda runs llama, mistral and qwen2 models");
  }
  const Weights root = Weights::index(files);
  const Weights model = root.pp("model");
  LlamaWeights weights;
  PAGODA_ASSIGN_OR_RETURN(weights.embed_tokens,
                          get_matrix(model, "embed_tokens.weight", c.vocab_size, c.hidden_size));
  weights.layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    PAGODA_ASSIGN_OR_RETURN(LlamaLayerWeights layer,
                            load_layer(model.pp("layers").pp(std::to_string(i)), c, linear));
    weights.layers.push_back(std::move(layer));
  }
  PAGODA_ASSIGN_OR_RETURN(weights.norm, get_vector(model, "norm.weight", c.hidden_size));
  // Some tied checkpoints still store lm_head; use it when present, the embedding otherwise.
  if (root.contains("lm_head.weight") || root.contains("lm_head.qweight") ||
      !c.tie_word_embeddings) {
    PAGODA_ASSIGN_OR_RETURN(weights.lm_head,
                            linear.load(root, "lm_head", c.vocab_size, c.hidden_size,
                                        /*quantize_at_load=*/false));
  } else {
    weights.lm_head = weights.embed_tokens;
  }
  weights.repacked = linear.take_storage();
  weights.rope_style = rope_style(files);
  PAGODA_ASSIGN_OR_RETURN(weights.rope_inv_freq, rope_inv_freq(files, root));
  return weights;
}

namespace {

// Counter-based draws (tensor seed, element index), so a tensor does not depend on the order
// the others were drawn in.
class DummyDraws {
 public:
  explicit DummyDraws(std::uint64_t seed) : next_seed_(seed) {}

  std::vector<float> uniform(std::int64_t n, float low, float high) {
    const std::uint64_t key = sampling::mix64(next_seed_++);
    std::vector<float> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint64_t bits = sampling::mix64(key ^ static_cast<std::uint64_t>(i));
      const float u = static_cast<float>(bits >> 40) * 0x1.0p-24f;  // [0, 1)
      out[static_cast<std::size_t>(i)] = low + (high - low) * u;
    }
    return out;
  }

  // A bf16 [rows, cols] matrix in `storage`, viewed.
  cpu::TensorView matrix(std::int64_t rows, std::int64_t cols, float bound, LlamaWeights& w) {
    const std::vector<float> values = uniform(rows * cols, -bound, bound);
    auto stored = std::make_shared<std::vector<std::uint16_t>>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) (*stored)[i] = to_bf16(values[i]);
    w.dummy_storage.push_back(stored);
    return cpu::dense_view(stored->data(), DType::kBF16, rows, cols);
  }

 private:
  static std::uint16_t to_bf16(float value) {  // round to nearest even; values are finite
    std::uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    bits += 0x7FFFu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
  }

  std::uint64_t next_seed_;
};

}  // namespace

StatusOr<LlamaWeights> dummy_llama_weights(const ModelConfig& c, std::uint64_t seed) {
  PAGODA_RETURN_IF_ERROR(c.validate());
  const std::string& arch = c.architecture;
  if (arch != "llama" && arch != "mistral" && arch != "qwen2") {
    return unimplemented("architecture \"" + arch +
                         "\" is not supported; Pagoda runs llama, mistral and qwen2 models");
  }
  if (c.rope_scaling.type == RopeScalingType::kYarn) {
    return unimplemented("rope scaling type \"yarn\" is not supported yet");
  }
  if (c.rope_scaling.type == RopeScalingType::kLlama3 &&
      c.rope_scaling.original_max_position_embeddings <= 0) {
    return invalid_argument("llama3 rope scaling needs original_max_position_embeddings");
  }
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  const auto bound = [](std::int64_t cols) { return 1.0f / std::sqrt(static_cast<float>(cols)); };
  DummyDraws draw(seed);
  LlamaWeights w;
  w.embed_tokens = draw.matrix(c.vocab_size, c.hidden_size, 1.0f, w);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LlamaLayerWeights layer;
    layer.input_layernorm = draw.uniform(c.hidden_size, 0.9f, 1.1f);
    layer.q_proj = draw.matrix(q_dim, c.hidden_size, bound(c.hidden_size), w);
    layer.k_proj = draw.matrix(kv_dim, c.hidden_size, bound(c.hidden_size), w);
    layer.v_proj = draw.matrix(kv_dim, c.hidden_size, bound(c.hidden_size), w);
    if (c.attention_bias) {
      layer.q_bias = draw.uniform(q_dim, -0.1f, 0.1f);
      layer.k_bias = draw.uniform(kv_dim, -0.1f, 0.1f);
      layer.v_bias = draw.uniform(kv_dim, -0.1f, 0.1f);
    }
    layer.o_proj = draw.matrix(c.hidden_size, q_dim, bound(q_dim), w);
    layer.post_attention_layernorm = draw.uniform(c.hidden_size, 0.9f, 1.1f);
    layer.gate_proj = draw.matrix(c.intermediate_size, c.hidden_size, bound(c.hidden_size), w);
    layer.up_proj = draw.matrix(c.intermediate_size, c.hidden_size, bound(c.hidden_size), w);
    layer.down_proj =
        draw.matrix(c.hidden_size, c.intermediate_size, bound(c.intermediate_size), w);
    w.layers.push_back(std::move(layer));
  }
  w.norm = draw.uniform(c.hidden_size, 0.9f, 1.1f);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens
                                    : draw.matrix(c.vocab_size, c.hidden_size,
                                                  bound(c.hidden_size), w);
  w.rope_style = cpu::RopeStyle::kRotateHalf;
  w.rope_inv_freq = cpu::rope_inv_freq(c.head_dim, c.rope_theta, cpu_rope_scaling(c.rope_scaling));
  return w;
}

}  // namespace pagoda::models
