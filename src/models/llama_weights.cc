#include "models/llama_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>

#include "backend/random_fill_draw.h"
#include "common/vector_clones.h"
#include "model/dequantize.h"
#include "models/architecture.h"
#include "models/linear_weights.h"
#include "models/weights.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"
#include "quant/load_threads.h"

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

// A one-element scale tensor (shape [] or [1]) as fp32; nullopt when `name` is absent.
StatusOr<std::optional<float>> get_scalar(const Weights& w, const std::string& name) {
  const ModelTensor* t = w.find(name);
  if (t == nullptr) return std::optional<float>();
  float value = 0.0f;
  if (t->num_elements() != 1 || !dequantize(t->dtype, t->data, std::span<float>(&value, 1)).ok()) {
    return invalid_argument(w.full_name(name) + " must be one F32, BF16 or F16 scale");
  }
  if (!(value > 0.0f) || !std::isfinite(value)) {
    return invalid_argument(w.full_name(name) + " is " + std::to_string(value) +
                            "; a KV cache scale must be positive and finite");
  }
  return std::optional<float>(value);
}

// The FP8 KV cache scales of one attention block, under the names vLLM reads: k_scale /
// v_scale (compressed-tensors, llm-compressor), the older k_proj.output_scale /
// v_proj.output_scale, or one kv_scale for both.
Status load_kv_scales(const Weights& attn, LlamaLayerWeights& layer) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<float> shared, get_scalar(attn, "kv_scale"));
  for (const bool value : {false, true}) {
    const std::string kv = value ? "v" : "k";
    PAGODA_ASSIGN_OR_RETURN(std::optional<float> scale, get_scalar(attn, kv + "_scale"));
    if (!scale) {
      PAGODA_ASSIGN_OR_RETURN(scale, get_scalar(attn, kv + "_proj.output_scale"));
    }
    if (!scale) scale = shared;
    (value ? layer.v_scale : layer.k_scale) = scale.value_or(1.0f);
  }
  return Status::ok_status();
}

StatusOr<LlamaLayerWeights> load_layer(const Weights& w, const ModelConfig& c,
                                       const Architecture& arch, LinearWeightLoader& linear) {
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
  if (arch.qk_norm) {
    PAGODA_ASSIGN_OR_RETURN(layer.q_norm, get_vector(attn, "q_norm.weight", c.head_dim));
    PAGODA_ASSIGN_OR_RETURN(layer.k_norm, get_vector(attn, "k_norm.weight", c.head_dim));
  }
  PAGODA_ASSIGN_OR_RETURN(layer.o_proj, linear.load(attn, "o_proj", c.hidden_size, q_dim));
  PAGODA_RETURN_IF_ERROR(load_kv_scales(attn, layer));
  PAGODA_ASSIGN_OR_RETURN(layer.post_attention_layernorm,
                          get_vector(w, "post_attention_layernorm.weight", c.hidden_size));
  const Weights mlp = w.pp("mlp");
  PAGODA_ASSIGN_OR_RETURN(layer.gate_proj,
                          linear.load(mlp, "gate_proj", c.intermediate_size, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.up_proj,
                          linear.load(mlp, "up_proj", c.intermediate_size, c.hidden_size));
  PAGODA_ASSIGN_OR_RETURN(layer.down_proj,
                          linear.load(mlp, "down_proj", c.hidden_size, c.intermediate_size));
  if (arch.sandwich_norms) {
    PAGODA_ASSIGN_OR_RETURN(layer.pre_feedforward_layernorm,
                            get_vector(w, "pre_feedforward_layernorm.weight", c.hidden_size));
    PAGODA_ASSIGN_OR_RETURN(layer.post_feedforward_layernorm,
                            get_vector(w, "post_feedforward_layernorm.weight", c.hidden_size));
  }
  return layer;
}

// Gemma's RMSNorm scales by (1 + weight) (in fp32, as transformers does); the kernels scale by
// the weight, so an HF checkpoint's norm weights get the 1 here. llama.cpp's converter added it
// to GGUF files already.
void offset_norm_weights(LlamaWeights& weights, float offset) {
  const auto add = [offset](std::vector<float>& norm) {
    for (float& value : norm) value += offset;
  };
  for (LlamaLayerWeights& layer : weights.layers) {
    for (std::vector<float>* norm :
         {&layer.input_layernorm, &layer.post_attention_layernorm, &layer.q_norm, &layer.k_norm,
          &layer.pre_feedforward_layernorm, &layer.post_feedforward_layernorm}) {
      add(*norm);
    }
  }
  add(weights.norm);
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

// llama.cpp converts some architectures (Llama, Mistral) with Q and K rows permuted so that RoPE
// rotates adjacent pairs; the registry says which.
cpu::RopeStyle rope_style(const ModelFiles& files, const Architecture& arch) {
  if (files.format == ModelFormat::kGguf && arch.gguf_rope == GgufRope::kAdjacentPairs) {
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
  auto found = architecture_of(c);
  if (!found.ok())
    return Status(found.status().code(), files.path + ": " + found.status().message());
  const Architecture& arch = **found;
  LinearWeightLoader linear(files, options.quantization);
  const Weights root = Weights::index(files);
  const Weights model = root.pp("model");
  LlamaWeights weights;
  PAGODA_ASSIGN_OR_RETURN(weights.embed_tokens,
                          get_matrix(model, "embed_tokens.weight", c.vocab_size, c.hidden_size));
  weights.layers.reserve(static_cast<std::size_t>(c.num_hidden_layers));
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    PAGODA_ASSIGN_OR_RETURN(LlamaLayerWeights layer,
                            load_layer(model.pp("layers").pp(std::to_string(i)), c, arch, linear));
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
  weights.rope_style = rope_style(files, arch);
  PAGODA_ASSIGN_OR_RETURN(weights.rope_inv_freq, rope_inv_freq(files, root));
  if (c.rope_local_theta) {
    weights.rope_local_inv_freq = cpu::rope_inv_freq(c.head_dim, *c.rope_local_theta, {});
  }
  if (files.format == ModelFormat::kHuggingFace && arch.hf_norm_weight_offset != 0.0f) {
    offset_norm_weights(weights, arch.hf_norm_weight_offset);
  }
  return weights;
}

namespace {

std::uint16_t to_bf16(float value) {  // round to nearest even; values are finite
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t value) {
  const std::uint32_t bits = std::uint32_t{value} << 16;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

// Element i of the dummy tensor drawn with `seed` in [low, high), rounded to bf16.
std::uint16_t draw_bf16_at(std::uint64_t seed, std::uint64_t i, float low, float high) {
  return to_bf16(random_fill_value(seed, i, low, high - low));
}

// out[i] = draw_bf16_at(seed, first + i, low, high) for i < n, and the same as fp32: cloned per
// ISA, so the hash and the rounding vectorize and fmaf is one instruction where the CPU has FMA
// (the baseline calls libm for it).
PAGODA_VECTOR_CLONES void draw_bf16_range(std::uint64_t seed, std::uint64_t first, float low,
                                          float high, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = draw_bf16_at(seed, first + static_cast<std::uint64_t>(i), low, high);
  }
}

PAGODA_VECTOR_CLONES void draw_f32_range(std::uint64_t seed, std::uint64_t first, float low,
                                         float high, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    out[i] = from_bf16(draw_bf16_at(seed, first + static_cast<std::uint64_t>(i), low, high));
  }
}

// out[i] = draw_bf16_at(seed, i, low, high) for every i: an 8B model's 7.5 billion weights take a
// while on one core, and every element is independent.
void draw_bf16(std::uint64_t seed, float low, float high, std::span<std::uint16_t> out) {
  constexpr std::int64_t kElementsPerRange = std::int64_t{1} << 20;
  quant::parallel_ranges(static_cast<std::int64_t>(out.size()), kElementsPerRange,
                         [&](std::int64_t begin, std::int64_t end) {
                           draw_bf16_range(seed, static_cast<std::uint64_t>(begin), low, high,
                                           out.data() + begin, end - begin);
                         });
}

// The CUDA executor's dummy draw (models/cuda_llama_weights.cc) on the host: one seed per
// device tensor in its order (fused QKV and gate/up included), each element from
// random_fill_value, rounded to bf16 as the device's default dtype is. The CPU then computes in
// fp32 with the very weights a bf16 GPU run has.
class DummyDraws {
 public:
  DummyDraws(std::uint64_t seed, quant::LoadTimeQuantization quantization, LlamaWeights& w)
      : next_seed_(seed), quantization_(quantization), w_(w) {}

  // `n` values in [low, high), bf16-rounded, as fp32 (norm weights, biases).
  std::vector<float> vector(std::int64_t n, float low, float high) {
    const std::uint16_t* bits = draw(n, low, high);
    std::vector<float> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = from_bf16(bits[i]);
    return out;
  }

  // One bf16 [sum(rows), cols] tensor, uniform in +-1/sqrt(cols), viewed as row blocks of
  // `rows` (q/k/v of the fused QKV, gate/up).
  std::vector<cpu::TensorView> matrices(std::initializer_list<std::int64_t> rows,
                                        std::int64_t cols) {
    std::int64_t total = 0;
    for (const std::int64_t r : rows) total += r;
    const float bound = 1.0f / std::sqrt(static_cast<float>(cols));
    const std::uint16_t* bits = draw(total * cols, -bound, bound);
    std::vector<cpu::TensorView> views;
    for (const std::int64_t r : rows) {
      views.push_back(cpu::dense_view(bits, DType::kBF16, r, cols));
      bits += r * cols;
    }
    return views;
  }
  cpu::TensorView matrix(std::int64_t rows, std::int64_t cols) { return matrices({rows}, cols)[0]; }
  // A decoder layer's linear layer: matrices(), quantized as --quantization says (the bf16 draw
  // is not kept).
  StatusOr<std::vector<cpu::TensorView>> linear(std::initializer_list<std::int64_t> rows,
                                                std::int64_t cols) {
    if (quantization_ == quant::LoadTimeQuantization::kNone) return matrices(rows, cols);
    const std::vector<std::int64_t> sizes(rows);
    PAGODA_ASSIGN_OR_RETURN(QuantizedDummyLinear q,
                            quantized_dummy_linear(next_seed_++, sizes, cols, quantization_));
    for (auto& m : q.storage) w_.repacked.push_back(std::move(m));
    return std::move(q.parts);
  }
  // The embedding: uniform in [-1, 1).
  cpu::TensorView embedding(std::int64_t rows, std::int64_t cols) {
    return cpu::dense_view(draw(rows * cols, -1.0f, 1.0f), DType::kBF16, rows, cols);
  }

 private:
  const std::uint16_t* draw(std::int64_t n, float low, float high) {
    auto stored = std::make_shared<std::vector<std::uint16_t>>(static_cast<std::size_t>(n));
    draw_bf16(next_seed_++, low, high, *stored);
    w_.dummy_storage.push_back(stored);
    return stored->data();
  }

  std::uint64_t next_seed_;
  quant::LoadTimeQuantization quantization_;
  LlamaWeights& w_;
};

}  // namespace

StatusOr<QuantizedDummyLinear> quantized_dummy_linear(std::uint64_t seed,
                                                      std::span<const std::int64_t> rows,
                                                      std::int64_t cols,
                                                      quant::LoadTimeQuantization quantization) {
  if (quantization == quant::LoadTimeQuantization::kNone) {
    return invalid_argument("quantized_dummy_linear: no quantization given");
  }
  const float bound = 1.0f / std::sqrt(static_cast<float>(cols));
  QuantizedDummyLinear out;
  std::int64_t first_row = 0;
  for (const std::int64_t r : rows) {
    const std::string name = "--load-format dummy linear weight [" + std::to_string(r) + ", " +
                             std::to_string(cols) + "]";
    // The draw's rows made by the quantizer's threads as they read them: a whole bf16 draw would
    // be faulted in, zeroed and freed on one thread (0.44 GB for an 8B gate/up), which took
    // longer than drawing it.
    const quant::RowSource drawn = [&, first_row](std::int64_t n, std::span<float> row) {
      const auto base = static_cast<std::uint64_t>((first_row + n) * cols);
      draw_f32_range(seed, base, -bound, bound, row.data(), cols);
    };
    first_row += r;
    StatusOr<quant::QuantizedMatrix> m = quantization == quant::LoadTimeQuantization::kFp8
                                             ? quant::quantize_fp8_per_channel(name, drawn, r, cols)
                                             : quant::quantize_int4_rtn(name, drawn, r, cols);
    if (!m.ok()) return m.status();
    auto owned = std::make_shared<const quant::QuantizedMatrix>(std::move(*m));
    out.parts.push_back(cpu::dense_view(owned->bytes.data(), owned->dtype, r, cols));
    out.storage.push_back(std::move(owned));
  }
  return out;
}

StatusOr<LlamaWeights> dummy_llama_weights(const ModelConfig& c, std::uint64_t seed,
                                           quant::LoadTimeQuantization quantization) {
  PAGODA_RETURN_IF_ERROR(c.validate());
  PAGODA_ASSIGN_OR_RETURN(const Architecture* arch, architecture_of(c));
  if (c.rope_scaling.type == RopeScalingType::kYarn) {
    return unimplemented("rope scaling type \"yarn\" is not supported yet");
  }
  if (c.rope_scaling.type == RopeScalingType::kLlama3 &&
      c.rope_scaling.original_max_position_embeddings <= 0) {
    return invalid_argument("llama3 rope scaling needs original_max_position_embeddings");
  }
  const std::int64_t hidden = c.hidden_size;
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  LlamaWeights w;
  DummyDraws draw(seed, quantization, w);
  w.embed_tokens = draw.embedding(c.vocab_size, hidden);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    LlamaLayerWeights layer;
    layer.input_layernorm = draw.vector(hidden, 0.9f, 1.1f);
    PAGODA_ASSIGN_OR_RETURN(const std::vector<cpu::TensorView> qkv,
                            draw.linear({q_dim, kv_dim, kv_dim}, hidden));
    layer.q_proj = qkv[0];
    layer.k_proj = qkv[1];
    layer.v_proj = qkv[2];
    if (c.attention_bias) {
      std::vector<float> bias = draw.vector(q_dim + 2 * kv_dim, -0.1f, 0.1f);
      layer.q_bias.assign(bias.begin(), bias.begin() + q_dim);
      layer.k_bias.assign(bias.begin() + q_dim, bias.begin() + q_dim + kv_dim);
      layer.v_bias.assign(bias.begin() + q_dim + kv_dim, bias.end());
    }
    if (arch->qk_norm) {
      layer.q_norm = draw.vector(c.head_dim, 0.9f, 1.1f);
      layer.k_norm = draw.vector(c.head_dim, 0.9f, 1.1f);
    }
    PAGODA_ASSIGN_OR_RETURN(const std::vector<cpu::TensorView> o_proj,
                            draw.linear({hidden}, q_dim));
    layer.o_proj = o_proj[0];
    layer.post_attention_layernorm = draw.vector(hidden, 0.9f, 1.1f);
    PAGODA_ASSIGN_OR_RETURN(const std::vector<cpu::TensorView> gate_up,
                            draw.linear({c.intermediate_size, c.intermediate_size}, hidden));
    layer.gate_proj = gate_up[0];
    layer.up_proj = gate_up[1];
    PAGODA_ASSIGN_OR_RETURN(const std::vector<cpu::TensorView> down_proj,
                            draw.linear({hidden}, c.intermediate_size));
    layer.down_proj = down_proj[0];
    w.layers.push_back(std::move(layer));
  }
  w.norm = draw.vector(hidden, 0.9f, 1.1f);
  w.lm_head = c.tie_word_embeddings ? w.embed_tokens : draw.matrix(c.vocab_size, hidden);
  // Gemma 3's sandwich norms after everything else (the CUDA side keeps them apart from the Llama
  // layout: cuda_gemma3_weights.h).
  if (arch->sandwich_norms) {
    for (LlamaLayerWeights& layer : w.layers) {
      layer.pre_feedforward_layernorm = draw.vector(hidden, 0.9f, 1.1f);
      layer.post_feedforward_layernorm = draw.vector(hidden, 0.9f, 1.1f);
    }
  }
  w.rope_style = cpu::RopeStyle::kRotateHalf;
  w.rope_inv_freq = cpu::rope_inv_freq(c.head_dim, c.rope_theta, cpu_rope_scaling(c.rope_scaling));
  if (c.rope_local_theta)
    w.rope_local_inv_freq = cpu::rope_inv_freq(c.head_dim, *c.rope_local_theta, {});
  return w;
}

}  // namespace pagoda::models
