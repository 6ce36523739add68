// DecoderOps on the GPU: the executor's weights in their fused layout (one [q + k + v, hidden]
// and one [2 * intermediate, hidden] linear layer per layer, each dense, W4A16 or FP8:
// cuda_linear_layer.h), its activation buffers and the step's device metadata, driven through
// kernels/ and cuBLASLt. One instance per run of the layers (eager, or while a decode graph is
// captured): it only launches, never waits.
#pragma once

#include <cuda_runtime_api.h>

#include "backend/cuda/blas_lt.h"
#include "models/cuda_model_executor.h"
#include "models/decoder_ops.h"

namespace pagoda::models {

/// The GPU's op set over one CudaModelExecutor.
class CudaDecoderOps final : public DecoderOps {
 public:
  CudaDecoderOps(CudaModelExecutor& executor, const CudaModelExecutor::LayerShape& shape)
      : e_(executor), shape_(shape) {}

  Status embed() override;
  Status rms_norm(std::int64_t layer, NormWeight weight) override;
  Status add_rms_norm(std::int64_t layer, NormWeight weight) override;
  Status qkv_projection(std::int64_t layer) override;
  Status head_rms_norm(std::int64_t layer) override;
  Status rope_and_cache_write(std::int64_t layer, RopeTable table) override;
  Status attention(std::int64_t layer, const AttentionOptions& options) override;
  Status output_projection(std::int64_t layer) override;
  Status gated_mlp(std::int64_t layer, GatedActivation activation) override;

  // Gemma 3 ops (cuda_decoder_ops_gemma3.cc).
  Status embed_scaled(float scale) override;
  Status post_norm_add_rms_norm(std::int64_t layer, NormWeight post, std::int64_t next_layer,
                                NormWeight next) override;

 private:
  // Any NormWeight of a layer, Gemma's pre/post-feedforward norms included; null when absent.
  const void* gemma3_norm_weight(std::int64_t layer, NormWeight weight) const;
  // The RoPE table of `table`: rope_theta's, or the sliding layers' (null without one).
  const float* rope_inv_freq(RopeTable table) const;

 private:
  const void* norm_weight(std::int64_t layer, NormWeight weight) const;
  // y = x W^T (+ bias) over the step's tokens, whatever form the layer's weight has; from the
  // executor's fp8_codes_ when the producer of x wrote them for this very layer.
  Status linear(const CudaLinearLayer& layer, const cuda::DeviceBuffer& x, const void* bias,
                cuda::DeviceBuffer& y);
  // The FP8 layer the next norm's (or gate's) output feeds, when it should also write its codes
  // for it: the consumer of `normed` after rms_norm / add_rms_norm(layer, weight), or null.
  const CudaLinearLayer* fp8_consumer(const CudaLinearLayer* layer) const;
  const CudaLinearLayer* normed_consumer(std::int64_t layer, NormWeight weight) const;
  Status launch_norm(const void* x, void* residual, std::int64_t layer, NormWeight weight);
  const CudaLayerWeights& layer_weights(std::int64_t layer) const {
    return e_.weights_.layers[static_cast<std::size_t>(layer)];
  }
  kernels::PagedKvCache cache(std::int64_t layer) const;
  std::int64_t qkv_dim() const;
  // The layer's KV group (0 unless the step runs the groups' own tables) and its tables.
  std::int32_t kv_group(std::int64_t layer) const;
  const std::int64_t* slot_mapping(std::int64_t layer) const;
  const std::int32_t* block_tables(std::int64_t layer) const;

  CudaModelExecutor& e_;
  const CudaModelExecutor::LayerShape& shape_;
  // The layer whose input e_.fp8_codes_ holds (written by the last producer), or null. Any op
  // that writes the producers' outputs without codes clears it.
  const CudaLinearLayer* fp8_codes_for_ = nullptr;
};

}  // namespace pagoda::models
