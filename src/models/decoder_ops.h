// The op set an architecture's layer loop is written in, cut at the grain of the fusions both
// backends already have. Each backend implements it once (CpuDecoderOps over src/backend/cpu,
// CudaDecoderOps over kernels/), owning the weights in its own fused layout and the activation
// buffers; an architecture file (llama.cc, qwen3.cc) only says which op runs on which layer's
// weights, in what order. One virtual call per op per layer: the per-element work stays inside
// each backend's fused kernels.
//
// The data flow every op works on, one row per token of the step:
//
//   residual [n, hidden]   the skip stream                  embed() writes it
//   normed   [n, hidden]   the next sublayer's input        rms_norm / add_rms_norm write it
//   q, k, v                [n, heads | kv_heads, head_dim]  qkv_projection writes them
//   attn     [n, heads * head_dim]                          attention writes it
//   out      [n, hidden]   a sublayer's output              output_projection / gated_mlp
//
// After the loop `normed` holds the final-normed rows; the executor runs the LM head on the
// rows that need logits (chunked and sampled on the device on CUDA).
#pragma once

#include <cstdint>

#include "pagoda/status.h"

namespace pagoda::models {

/// Which norm weight of a layer (or of the model) an op applies.
enum class NormWeight : std::uint8_t {
  kInput,            ///< input_layernorm: before attention
  kPostAttention,    ///< post_attention_layernorm: pre-MLP; on the attention output in Gemma 3
  kQ,                ///< self_attn.q_norm: per head, before RoPE (Qwen3, Gemma 3)
  kK,                ///< self_attn.k_norm
  kFinal,            ///< model.norm: the layer argument is ignored
  kPreFeedforward,   ///< pre_feedforward_layernorm: before the MLP (Gemma 3)
  kPostFeedforward,  ///< post_feedforward_layernorm: on the MLP's output (Gemma 3)
};

/// The gate's activation in gate(x) * up(x).
enum class GatedActivation : std::uint8_t {
  kSilu,      ///< SwiGLU (Llama, Mistral, Qwen)
  kGeluTanh,  ///< GeGLU with gelu_pytorch_tanh (Gemma)
};

/// How a layer attends. Defaults are Llama's: scores scaled by head_dim^-1/2, full causal
/// context, no soft-cap.
struct AttentionOptions {
  float softmax_scale = 0.0f;       ///< 0: head_dim^-1/2
  std::int64_t sliding_window = 0;  ///< 0: every earlier position; else the last this many
  float logit_softcap = 0.0f;       ///< 0: none; else scores = cap * tanh(scores / cap)
};

/// Which RoPE frequency table a layer rotates with (Gemma 3's sliding layers have their own
/// base). Backends build both tables at load; kGlobal is rope_theta with the config's scaling.
enum class RopeTable : std::uint8_t { kGlobal, kLocal };

/// A backend's implementation of the ops; one instance runs one step at a time.
class DecoderOps {
 public:
  virtual ~DecoderOps() = default;

  /// residual = embed_tokens[token_ids].
  virtual Status embed() = 0;
  /// normed = rms_norm(residual, weight).
  virtual Status rms_norm(std::int64_t layer, NormWeight weight) = 0;
  /// residual += out; normed = rms_norm(residual, weight): a skip connection fused with the
  /// norm of the sublayer that follows it.
  virtual Status add_rms_norm(std::int64_t layer, NormWeight weight) = 0;
  /// q, k, v = normed Wq (+bq), normed Wk (+bk), normed Wv (+bv), as one fused product.
  virtual Status qkv_projection(std::int64_t layer) = 0;
  /// q and k normed per head over head_dim with q_norm / k_norm (kQ, kK), in place.
  virtual Status head_rms_norm(std::int64_t layer) = 0;
  /// RoPE on q and k at the batch's positions, then k and v written to the layer's KV cache.
  virtual Status rope_and_cache_write(std::int64_t layer, RopeTable table) = 0;
  /// attn = softmax(q K^T * scale, causal [+ window]) V over the layer's cached context.
  virtual Status attention(std::int64_t layer, const AttentionOptions& options) = 0;
  /// out = attn Wo.
  virtual Status output_projection(std::int64_t layer) = 0;
  /// out = down(act(gate(normed)) * up(normed)), gate and up as one fused product.
  virtual Status gated_mlp(std::int64_t layer, GatedActivation activation) = 0;

  // Gemma 3's ops.

  /// residual = embed_tokens[token_ids] * scale, the scale rounded to the activation dtype
  /// first (as transformers' Gemma3TextScaledWordEmbedding does).
  virtual Status embed_scaled(float scale) = 0;
  /// out = rms_norm(out, post of `layer`); residual += out; normed = rms_norm(residual, next of
  /// `next_layer`): a sandwich norm on a sublayer's output fused with the skip connection and the
  /// norm of the sublayer that follows it.
  virtual Status post_norm_add_rms_norm(std::int64_t layer, NormWeight post,
                                        std::int64_t next_layer, NormWeight next) = 0;
};

}  // namespace pagoda::models
