// The weights of a decoder in the architecture registry (Llama 2/3, SmolLM2, Mistral, Qwen2/2.5,
// Qwen3), found by HF name and checked against the config: the one table of what a layer holds.
// Matrices stay in the mapped file in their stored type; only the small vectors (norm weights,
// biases, RoPE frequencies) are decoded into fp32 copies.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/tensor_view.h"
#include "model/model_files.h"
#include "pagoda/status.h"
#include "quant/load_time_quantization.h"
#include "quant/quantized_matrix.h"

namespace pagoda::models {

/// One decoder layer.
struct LlamaLayerWeights {
  std::vector<float> input_layernorm;  ///< [hidden]
  cpu::TensorView q_proj;              ///< [num_heads * head_dim, hidden]
  cpu::TensorView k_proj;              ///< [num_kv_heads * head_dim, hidden]
  cpu::TensorView v_proj;              ///< [num_kv_heads * head_dim, hidden]
  std::vector<float> q_bias;           ///< [num_heads * head_dim], empty without bias
  std::vector<float> k_bias;           ///< [num_kv_heads * head_dim], empty without bias
  std::vector<float> v_bias;           ///< [num_kv_heads * head_dim], empty without bias
  std::vector<float>
      q_norm;  ///< [head_dim], per-head RMSNorm of q; empty unless Architecture::qk_norm
  std::vector<float>
      k_norm;  ///< [head_dim], per-head RMSNorm of k; empty unless Architecture::qk_norm
  cpu::TensorView o_proj;                       ///< [hidden, num_heads * head_dim]
  std::vector<float> post_attention_layernorm;  ///< [hidden]
  cpu::TensorView gate_proj;                    ///< [intermediate, hidden]
  cpu::TensorView up_proj;                      ///< [intermediate, hidden]
  cpu::TensorView down_proj;                    ///< [hidden, intermediate]
  /// [hidden] each; empty unless Architecture::sandwich_norms (Gemma 3, where
  /// post_attention_layernorm norms the attention output and these the MLP's input and output).
  std::vector<float> pre_feedforward_layernorm;
  std::vector<float> post_feedforward_layernorm;
  /// The FP8 KV cache's per-tensor scales for this layer (the cache holds e4m3(k / k_scale) and
  /// e4m3(v / v_scale)): a checkpoint's `self_attn.k_scale` / `v_scale` (or the older
  /// `k_proj.output_scale` / `v_proj.output_scale`, or one `kv_scale` for both), 1 otherwise
  /// (vLLM's default without calibrated scales). Only an FP8 cache uses them.
  float k_scale = 1.0f;
  float v_scale = 1.0f;
};

/// The whole model, plus how its RoPE is applied.
struct LlamaWeights {
  cpu::TensorView embed_tokens;  ///< [vocab, hidden]
  std::vector<LlamaLayerWeights> layers;
  std::vector<float> norm;  ///< [hidden]
  cpu::TensorView lm_head;  ///< [vocab, hidden]; embed_tokens when tied
  /// Which dimension pairs RoPE rotates: adjacent for llama.cpp-converted llama/mistral GGUF
  /// files (their Q/K rows are permuted at conversion), rotate-half otherwise.
  cpu::RopeStyle rope_style = cpu::RopeStyle::kRotateHalf;
  std::vector<float> rope_inv_freq;  ///< [head_dim / 2], scaling applied
  /// [head_dim / 2]: the sliding layers' table (RopeTable::kLocal) from rope_local_theta, no
  /// scaling; empty when the config has no local base.
  std::vector<float> rope_local_inv_freq;
  /// The matrices repacked or quantized at load (GPTQ, AWQ, FP8, --quantization) that some
  /// views above point into; empty when every matrix is used in place from the file.
  std::vector<std::shared_ptr<const quant::QuantizedMatrix>> repacked;
  /// The bf16 matrices of dummy_llama_weights that the views above point into.
  std::vector<std::shared_ptr<const std::vector<std::uint16_t>>> dummy_storage;
  /// The matrices interleave_for_decode repacked into 16-row panels (interleaved_rows.h) that
  /// the layers' linear views and lm_head point into; empty unless the CPU executor interleaves.
  std::vector<std::shared_ptr<const cpu::InterleavedMatrix>> interleaved;
};

/// How to load the weights.
struct LlamaLoadOptions {
  /// `--quantization`: quantize the decoder layers' unquantized linear weights at load (the
  /// embedding and the LM head stay as stored).
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
};

/// Finds and checks every weight of `files` (which must outlive the result).
StatusOr<LlamaWeights> load_llama_weights(const ModelFiles& files,
                                          const LlamaLoadOptions& options = {});

/// Random weights of `config`'s shapes (`--load-format dummy` on the CPU): the CUDA executor's
/// dummy_llama_weights for the same seed, bit for bit at its default bf16 (random_fill_value,
/// one seed per device tensor in the same order): matrices uniform in +-1/sqrt(columns), the
/// embedding in [-1, 1), norm weights in [0.9, 1.1), biases in +-0.1, all bf16-rounded; HF
/// rotate-half RoPE with the config's scaling.
/// With `quantization` fp8 or int4 the decoder layers' linear weights are those bf16 draws
/// quantized as `--quantization` quantizes a checkpoint's weights (quantize_fp8_per_channel,
/// quantize_int4_rtn: F8_S and Q4_Z views), one layer at a time, so the bf16 copy of only one
/// matrix is held at once; the embedding and the LM head stay bf16, as with a checkpoint.
StatusOr<LlamaWeights> dummy_llama_weights(
    const ModelConfig& config, std::uint64_t seed,
    quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone);

/// One dummy linear layer quantized at load: the views and the matrices they point into.
struct QuantizedDummyLinear {
  std::vector<cpu::TensorView> parts;  ///< one per row block, F8_S or Q4_Z
  std::vector<std::shared_ptr<const quant::QuantizedMatrix>> storage;
};

/// The bf16 tensor [sum(rows), cols] that dummy_llama_weights draws with `seed` (uniform in
/// +-1/sqrt(cols)), cut into row blocks of `rows` (q/k/v, gate/up), each quantized as
/// `quantization` (fp8 or int4) quantizes a checkpoint's weight of that shape. The draw runs on
/// the machine's cores. The CUDA executor's quantized dummy weights are these, layer by layer.
StatusOr<QuantizedDummyLinear> quantized_dummy_linear(std::uint64_t seed,
                                                      std::span<const std::int64_t> rows,
                                                      std::int64_t cols,
                                                      quant::LoadTimeQuantization quantization);

}  // namespace pagoda::models
