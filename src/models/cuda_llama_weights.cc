#include "models/cuda_llama_weights.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <span>

#include "backend/cpu/rope.h"
#include "backend/cpu/row_decoder.h"
#include "backend/cuda/cuda_status.h"
#include "backend/cuda/random_fill.h"
#include "models/architecture.h"
#include "models/device_linear_plan.h"

namespace pagoda::models {

namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

// Host-to-device copies go through one pinned staging buffer in chunks of whole rows.
class Uploader {
 public:
  static StatusOr<Uploader> create(ScalarType dtype) {
    Uploader u;
    u.dtype_ = dtype;
    PAGODA_ASSIGN_OR_RETURN(u.staging_, cuda::PinnedHostBuffer::allocate(kStagingBytes));
    return u;
  }

  // Appends rows [0, view.num_rows) of `view`, decoded and converted, at element `offset` of
  // `dst` (a matrix of view.num_cols columns). A GPTQ act-order view's stored column j is input
  // channel input_permutation[j]: it lands in column input_permutation[j], so the device matrix
  // multiplies x in its own order, as the CPU's gathered product does.
  Status matrix(const cpu::TensorView& view, DeviceBuffer& dst, std::int64_t row_offset) {
    const std::int64_t cols = view.num_cols;
    const std::size_t row_bytes = static_cast<std::size_t>(cols) * cuda::scalar_type_size(dtype_);
    const std::int64_t rows_per_chunk =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(kStagingBytes / row_bytes));
    if (row_bytes > kStagingBytes) return invalid_argument("weight row larger than the staging");
    row_f32_.resize(static_cast<std::size_t>(cols));
    row_in_order_.resize(static_cast<std::size_t>(cols));
    const std::int32_t* perm = view.input_permutation;
    for (std::int64_t r0 = 0; r0 < view.num_rows; r0 += rows_per_chunk) {
      const std::int64_t rows = std::min(rows_per_chunk, view.num_rows - r0);
      auto* staging = static_cast<std::uint8_t*>(staging_.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        cpu::decode_row(view, r0 + r, 0, cols, row_f32_.data());
        if (perm != nullptr) {
          for (std::int64_t j = 0; j < cols; ++j) row_in_order_[perm[j]] = row_f32_[j];
        }
        cuda::convert_from_f32(perm != nullptr ? row_in_order_.data() : row_f32_.data(), cols,
                               dtype_, staging + r * row_bytes);
      }
      auto* target = static_cast<std::uint8_t*>(dst.data()) + (row_offset + r0) * row_bytes;
      PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpy(
          target, staging, static_cast<std::size_t>(rows) * row_bytes, cudaMemcpyHostToDevice));
    }
    return Status::ok_status();
  }

  // Copies an fp32 vector, converted, at element `offset` of `dst`.
  Status vector(const std::vector<float>& values, DeviceBuffer& dst, std::int64_t offset,
                ScalarType type) {
    const std::size_t bytes = values.size() * cuda::scalar_type_size(type);
    if (bytes > kStagingBytes) return invalid_argument("vector larger than the staging");
    cuda::convert_from_f32(values.data(), static_cast<std::int64_t>(values.size()), type,
                           staging_.data());
    PAGODA_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(static_cast<std::uint8_t*>(dst.data()) + offset * cuda::scalar_type_size(type),
                   staging_.data(), bytes, cudaMemcpyHostToDevice));
    return Status::ok_status();
  }

 private:
  static constexpr std::size_t kStagingBytes = 64u << 20;
  ScalarType dtype_ = ScalarType::kBF16;
  cuda::PinnedHostBuffer staging_;
  std::vector<float> row_f32_;
  std::vector<float> row_in_order_;  // row_f32_ with act-order columns put back in input order
};

StatusOr<DeviceBuffer> allocate(std::int64_t elements, ScalarType type) {
  return DeviceBuffer::allocate(static_cast<std::size_t>(elements) * cuda::scalar_type_size(type));
}

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

struct Shapes {
  std::int64_t hidden, q_dim, kv_dim, qkv_rows, intermediate, vocab;
};

Shapes shapes_of(const ModelConfig& c) {
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t kv_dim = c.num_key_value_heads * c.head_dim;
  return {c.hidden_size, q_dim, kv_dim, q_dim + 2 * kv_dim, c.intermediate_size, c.vocab_size};
}

StatusOr<CudaLinearLayer> allocate_dense(std::int64_t rows, std::int64_t cols, ScalarType dtype) {
  PAGODA_ASSIGN_OR_RETURN(DeviceBuffer w, allocate(rows * cols, dtype));
  return CudaLinearLayer::dense(std::move(w), rows, cols);
}

// One linear layer whose weight is `parts` stacked by rows (Q, K, V; gate, up; or one part), in
// the form device_linear_kind picks: the parts' quantized rows stacked into one matrix and
// repacked into the GPU layout, or every row decoded into `dtype`.
StatusOr<CudaLinearLayer> upload_linear(std::span<const cpu::TensorView> parts, ScalarType dtype,
                                        Uploader& up) {
  const DeviceLinearKind kind = device_linear_kind(parts, dtype != ScalarType::kF32);
  if (kind == DeviceLinearKind::kW4A16 || kind == DeviceLinearKind::kW8A16) {
    PAGODA_ASSIGN_OR_RETURN(const quant::W4A16Matrix packed, w4a16_layout(parts));
    PAGODA_ASSIGN_OR_RETURN(kernels::W4A16Linear layer, kernels::W4A16Linear::upload(packed));
    return CudaLinearLayer::w4a16(std::move(layer));
  }
  if (kind == DeviceLinearKind::kFp8) {
    PAGODA_ASSIGN_OR_RETURN(const quant::Fp8ChannelMatrix channels, fp8_layout(parts));
    PAGODA_ASSIGN_OR_RETURN(kernels::Fp8Linear layer, kernels::Fp8Linear::upload(channels));
    return CudaLinearLayer::fp8(std::move(layer));
  }
  std::int64_t rows = 0;
  for (const cpu::TensorView& p : parts) rows += p.num_rows;
  PAGODA_ASSIGN_OR_RETURN(DeviceBuffer w, allocate(rows * parts[0].num_cols, dtype));
  std::int64_t offset = 0;
  for (const cpu::TensorView& p : parts) {
    PAGODA_RETURN_IF_ERROR(up.matrix(p, w, offset));
    offset += p.num_rows;
  }
  return CudaLinearLayer::dense(std::move(w), rows, parts[0].num_cols);
}

// The embedding or the LM head in the form device_table_kind picks: a GGUF table keeps its W4A16
// form, so the device holds about its file's bytes; the rest is dense in `dtype`.
StatusOr<CudaLinearLayer> upload_table(const cpu::TensorView& table, ScalarType dtype,
                                       Uploader& up) {
  if (device_table_kind(table, dtype != ScalarType::kF32) != DeviceLinearKind::kDense) {
    return upload_linear(std::span(&table, 1), dtype, up);
  }
  PAGODA_ASSIGN_OR_RETURN(DeviceBuffer w, allocate(table.num_rows * table.num_cols, dtype));
  PAGODA_RETURN_IF_ERROR(up.matrix(table, w, 0));
  return CudaLinearLayer::dense(std::move(w), table.num_rows, table.num_cols);
}

// Device buffers of every weight, uninitialized; the decoder layers' linear layers dense only
// when `dense_linears`, and the embedding and LM head only when `dense_tables` (dummy weights),
// else left for upload_linear / upload_table.
StatusOr<CudaLlamaWeights> allocate_weights(const ModelConfig& c, ScalarType dtype, bool bias,
                                            bool qk_norm, bool separate_lm_head, bool dense_linears,
                                            bool dense_tables) {
  const Shapes s = shapes_of(c);
  CudaLlamaWeights w;
  w.dtype = dtype;
  if (dense_tables) {
    PAGODA_ASSIGN_OR_RETURN(w.embed_tokens, allocate_dense(s.vocab, s.hidden, dtype));
  }
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    CudaLayerWeights layer;
    PAGODA_ASSIGN_OR_RETURN(layer.input_layernorm, allocate(s.hidden, dtype));
    if (bias) {
      PAGODA_ASSIGN_OR_RETURN(layer.qkv_bias, allocate(s.qkv_rows, dtype));
    }
    if (qk_norm) {
      PAGODA_ASSIGN_OR_RETURN(layer.q_norm, allocate(c.head_dim, dtype));
      PAGODA_ASSIGN_OR_RETURN(layer.k_norm, allocate(c.head_dim, dtype));
    }
    PAGODA_ASSIGN_OR_RETURN(layer.post_attention_layernorm, allocate(s.hidden, dtype));
    if (dense_linears) {
      PAGODA_ASSIGN_OR_RETURN(layer.qkv_proj, allocate_dense(s.qkv_rows, s.hidden, dtype));
      PAGODA_ASSIGN_OR_RETURN(layer.o_proj, allocate_dense(s.hidden, s.q_dim, dtype));
      PAGODA_ASSIGN_OR_RETURN(layer.gate_up_proj,
                              allocate_dense(2 * s.intermediate, s.hidden, dtype));
      PAGODA_ASSIGN_OR_RETURN(layer.down_proj, allocate_dense(s.hidden, s.intermediate, dtype));
    }
    w.layers.push_back(std::move(layer));
  }
  PAGODA_ASSIGN_OR_RETURN(w.norm, allocate(s.hidden, dtype));
  if (dense_tables && separate_lm_head) {
    PAGODA_ASSIGN_OR_RETURN(w.lm_head, allocate_dense(s.vocab, s.hidden, dtype));
  }
  PAGODA_ASSIGN_OR_RETURN(w.inv_freq, allocate(c.head_dim / 2, ScalarType::kF32));
  return w;
}

}  // namespace

StatusOr<CudaLlamaWeights> upload_llama_weights(const ModelConfig& c, const LlamaWeights& host,
                                                ScalarType dtype) {
  const Shapes s = shapes_of(c);
  const bool bias = !host.layers.empty() && !host.layers[0].q_bias.empty();
  const bool qk_norm = !host.layers.empty() && !host.layers[0].q_norm.empty();
  const bool separate_lm_head = host.lm_head.data != host.embed_tokens.data;
  PAGODA_ASSIGN_OR_RETURN(CudaLlamaWeights w,
                          allocate_weights(c, dtype, bias, qk_norm, separate_lm_head,
                                           /*dense_linears=*/false, /*dense_tables=*/false));
  PAGODA_ASSIGN_OR_RETURN(Uploader up, Uploader::create(dtype));
  PAGODA_ASSIGN_OR_RETURN(w.embed_tokens, upload_table(host.embed_tokens, dtype, up));
  for (std::size_t i = 0; i < host.layers.size(); ++i) {
    const LlamaLayerWeights& h = host.layers[i];
    CudaLayerWeights& d = w.layers[i];
    PAGODA_RETURN_IF_ERROR(up.vector(h.input_layernorm, d.input_layernorm, 0, dtype));
    const cpu::TensorView qkv[] = {h.q_proj, h.k_proj, h.v_proj};
    PAGODA_ASSIGN_OR_RETURN(d.qkv_proj, upload_linear(qkv, dtype, up));
    if (bias) {
      PAGODA_RETURN_IF_ERROR(up.vector(h.q_bias, d.qkv_bias, 0, dtype));
      PAGODA_RETURN_IF_ERROR(up.vector(h.k_bias, d.qkv_bias, s.q_dim, dtype));
      PAGODA_RETURN_IF_ERROR(up.vector(h.v_bias, d.qkv_bias, s.q_dim + s.kv_dim, dtype));
    }
    if (qk_norm) {
      PAGODA_RETURN_IF_ERROR(up.vector(h.q_norm, d.q_norm, 0, dtype));
      PAGODA_RETURN_IF_ERROR(up.vector(h.k_norm, d.k_norm, 0, dtype));
    }
    PAGODA_ASSIGN_OR_RETURN(d.o_proj, upload_linear(std::span(&h.o_proj, 1), dtype, up));
    PAGODA_RETURN_IF_ERROR(
        up.vector(h.post_attention_layernorm, d.post_attention_layernorm, 0, dtype));
    const cpu::TensorView gate_up[] = {h.gate_proj, h.up_proj};
    PAGODA_ASSIGN_OR_RETURN(d.gate_up_proj, upload_linear(gate_up, dtype, up));
    PAGODA_ASSIGN_OR_RETURN(d.down_proj, upload_linear(std::span(&h.down_proj, 1), dtype, up));
    d.k_cache_scale = h.k_scale;
    d.v_cache_scale = h.v_scale;
  }
  PAGODA_RETURN_IF_ERROR(up.vector(host.norm, w.norm, 0, dtype));
  if (separate_lm_head) {
    PAGODA_ASSIGN_OR_RETURN(w.lm_head, upload_table(host.lm_head, dtype, up));
  }
  PAGODA_RETURN_IF_ERROR(up.vector(host.rope_inv_freq, w.inv_freq, 0, ScalarType::kF32));
  w.rope_style = host.rope_style == cpu::RopeStyle::kAdjacentPairs
                     ? kernels::RopeStyle::kAdjacentPairs
                     : kernels::RopeStyle::kRotateHalf;
  PAGODA_ASSIGN_OR_RETURN(w.gemma3, upload_gemma3_weights(c, host, dtype));
  return w;
}

StatusOr<CudaLlamaWeights> dummy_llama_weights(const ModelConfig& c, ScalarType dtype,
                                               std::uint64_t seed,
                                               quant::LoadTimeQuantization quantization) {
  PAGODA_RETURN_IF_ERROR(c.validate());
  PAGODA_ASSIGN_OR_RETURN(const Architecture* arch, architecture_of(c));
  const Shapes s = shapes_of(c);
  const bool quantized = quantization != quant::LoadTimeQuantization::kNone;
  PAGODA_ASSIGN_OR_RETURN(CudaLlamaWeights w,
                          allocate_weights(c, dtype, c.attention_bias, arch->qk_norm,
                                           !c.tie_word_embeddings, /*dense_linears=*/!quantized,
                                           /*dense_tables=*/true));
  std::optional<Uploader> up;
  if (quantized) {
    PAGODA_ASSIGN_OR_RETURN(up, Uploader::create(dtype));
  }
  std::uint64_t next_seed = seed;
  auto fill = [&](DeviceBuffer& buffer, std::int64_t n, float low, float high) {
    return cuda::fill_uniform(buffer.data(), n, dtype, low, high, next_seed++, nullptr);
  };
  // A linear layer of row blocks `rows`: drawn in place on the device, or drawn and quantized on
  // the host as the CPU executor's and uploaded in its quantized form (one layer's worth of
  // host memory at a time).
  auto fill_linear = [&](CudaLinearLayer& layer, std::initializer_list<std::int64_t> rows,
                         std::int64_t cols) -> Status {
    if (quantized) {
      const std::vector<std::int64_t> sizes(rows);
      PAGODA_ASSIGN_OR_RETURN(const QuantizedDummyLinear q,
                              quantized_dummy_linear(next_seed++, sizes, cols, quantization));
      PAGODA_ASSIGN_OR_RETURN(layer, upload_linear(q.parts, dtype, *up));
      return Status::ok_status();
    }
    std::int64_t total = 0;
    for (const std::int64_t r : rows) total += r;
    const float bound = 1.0f / std::sqrt(static_cast<float>(cols));
    return cuda::fill_uniform(layer.dense_weight(), total * cols, dtype, -bound, bound, next_seed++,
                              nullptr);
  };
  PAGODA_RETURN_IF_ERROR(cuda::fill_uniform(w.embed_tokens.dense_weight(), s.vocab * s.hidden,
                                            dtype, -1.0f, 1.0f, next_seed++, nullptr));
  for (CudaLayerWeights& layer : w.layers) {
    PAGODA_RETURN_IF_ERROR(fill(layer.input_layernorm, s.hidden, 0.9f, 1.1f));
    PAGODA_RETURN_IF_ERROR(fill_linear(layer.qkv_proj, {s.q_dim, s.kv_dim, s.kv_dim}, s.hidden));
    if (c.attention_bias) PAGODA_RETURN_IF_ERROR(fill(layer.qkv_bias, s.qkv_rows, -0.1f, 0.1f));
    // The host's dummy_llama_weights draws them here too, so both sides get the same values.
    if (arch->qk_norm) {
      PAGODA_RETURN_IF_ERROR(fill(layer.q_norm, c.head_dim, 0.9f, 1.1f));
      PAGODA_RETURN_IF_ERROR(fill(layer.k_norm, c.head_dim, 0.9f, 1.1f));
    }
    PAGODA_RETURN_IF_ERROR(fill_linear(layer.o_proj, {s.hidden}, s.q_dim));
    PAGODA_RETURN_IF_ERROR(fill(layer.post_attention_layernorm, s.hidden, 0.9f, 1.1f));
    PAGODA_RETURN_IF_ERROR(
        fill_linear(layer.gate_up_proj, {s.intermediate, s.intermediate}, s.hidden));
    PAGODA_RETURN_IF_ERROR(fill_linear(layer.down_proj, {s.hidden}, s.intermediate));
  }
  PAGODA_RETURN_IF_ERROR(fill(w.norm, s.hidden, 0.9f, 1.1f));
  if (!c.tie_word_embeddings) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(s.hidden));
    PAGODA_RETURN_IF_ERROR(cuda::fill_uniform(w.lm_head.dense_weight(), s.vocab * s.hidden, dtype,
                                              -bound, bound, next_seed++, nullptr));
  }
  const std::vector<float> inv_freq =
      cpu::rope_inv_freq(c.head_dim, c.rope_theta, cpu_rope_scaling(c.rope_scaling));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpy(w.inv_freq.data(), inv_freq.data(),
                                         inv_freq.size() * sizeof(float), cudaMemcpyHostToDevice));
  PAGODA_ASSIGN_OR_RETURN(w.gemma3, dummy_gemma3_weights(c, dtype, next_seed));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
  return w;
}

}  // namespace pagoda::models

namespace pagoda::models {

std::size_t CudaLlamaWeights::device_bytes() const {
  std::size_t bytes = embed_tokens.device_bytes() + norm.bytes() + lm_head.device_bytes() +
                      inv_freq.bytes() + gemma3.device_bytes();
  for (const CudaLayerWeights& l : layers) {
    bytes += l.input_layernorm.bytes() + l.qkv_bias.bytes() + l.q_norm.bytes() + l.k_norm.bytes() +
             l.post_attention_layernorm.bytes();
    for (const CudaLinearLayer* linear : l.linear_layers()) bytes += linear->device_bytes();
  }
  return bytes;
}

std::string CudaLlamaWeights::summary() const {
  int counts[4] = {0, 0, 0, 0};
  for (const CudaLayerWeights& l : layers) {
    for (const CudaLinearLayer* linear : l.linear_layers())
      ++counts[static_cast<int>(linear->kind())];
  }
  std::string text;
  for (const DeviceLinearKind kind : {DeviceLinearKind::kW4A16, DeviceLinearKind::kW8A16,
                                      DeviceLinearKind::kFp8, DeviceLinearKind::kDense}) {
    const int n = counts[static_cast<int>(kind)];
    if (n == 0) continue;
    if (!text.empty()) text += " + ";
    text += std::to_string(n) + " " + std::string(device_linear_kind_name(kind));
  }
  text += " linear layers";
  // Tables kept quantized (a GGUF model's): "..., w8a16 embedding and LM head".
  const DeviceLinearKind embed = embed_tokens.kind();
  const DeviceLinearKind head = lm_head_layer().kind();
  if (embed != DeviceLinearKind::kDense && embed == head) {
    text += ", " + std::string(device_linear_kind_name(embed)) + " embedding and LM head";
  } else {
    if (embed != DeviceLinearKind::kDense) {
      text += ", " + std::string(device_linear_kind_name(embed)) + " embedding";
    }
    if (head != DeviceLinearKind::kDense) {
      text += ", " + std::string(device_linear_kind_name(head)) + " LM head";
    }
  }
  char bytes[48];
  std::snprintf(bytes, sizeof(bytes), ", %.2f GiB of weights",
                static_cast<double>(device_bytes()) / (1 << 30));
  return text + bytes;
}

}  // namespace pagoda::models
