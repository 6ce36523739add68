// ModelExecutor on an NVIDIA GPU: the Llama-family forward pass (llama.cc's sequence of ops) with
// kernels/ and cuBLASLt, weights in one activation dtype, a paged KV cache per layer whose size
// comes from a profiling pass and --gpu-memory-utilization. execute() samples beside the logits
// (kernels/sampling/device_sampler.h): per LM-head chunk process -> sample -> logprobs on the
// device, and one copy of token ids and logprobs back per step. Written without a GPU at hand:
// see docs/gpu.md for what has and has not been run on hardware.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/sampling/device_sampler.h"
#include "model/model_files.h"
#include "models/cuda_llama_weights.h"
#include "models/cuda_step_metadata.h"
#include "pagoda/model_executor.h"

namespace pagoda::models {

/// How to build a CudaModelExecutor.
struct CudaExecutorOptions {
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< weights, activations and KV cache
  std::int64_t max_num_batched_tokens = 2048;        ///< activation buffers hold this many tokens
  std::int64_t max_num_seqs = 256;                   ///< sequences per step
  std::int64_t max_model_len = 0;                    ///< 0: the model's max_position_embeddings
  std::size_t blas_workspace_bytes = 32u << 20;
  int max_decode_splits = 64;
  /// --enforce-eager: no CUDA graphs; every decode step launches its kernels one by one.
  bool enforce_eager = false;
};

/// Runs a Llama-family model on the current CUDA device.
class CudaModelExecutor final : public ModelExecutor {
 public:
  /// Loads `files`' weights (dequantized, converted to options.dtype) onto the device.
  static StatusOr<std::unique_ptr<CudaModelExecutor>> create(
      std::shared_ptr<const ModelFiles> files, const CudaExecutorOptions& options);
  /// From weights already in host memory (tests build random ones).
  static StatusOr<std::unique_ptr<CudaModelExecutor>> create_from_weights(
      const ModelConfig& config, const LlamaWeights& weights, const CudaExecutorOptions& options);
  /// Random weights of `config`'s shapes (--load-format dummy).
  static StatusOr<std::unique_ptr<CudaModelExecutor>> create_dummy(
      const ModelConfig& config, const CudaExecutorOptions& options, std::uint64_t seed);

  const ModelExecutorInfo& info() const override { return info_; }
  std::int64_t kv_cache_bytes_per_block(std::int64_t block_size) const override;
  Status allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) override;
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  std::int64_t kv_block_size() const override { return block_size_; }
  Status forward(const ForwardBatch& batch, float* logits) override;

  Status open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) override;
  void close_sampling_slot(std::int32_t slot) override;
  /// A failure (a closed slot, a bad token, a CUDA error) is returned by the next execute().
  void accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) override;
  Status execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                 StepOutput& out) override;

  /// Bytes the last execute() copied from the device to the host: token ids, the asked-for
  /// logprobs and the raw rows of return_logits rows (forward() copies every row's logits).
  std::int64_t last_step_d2h_bytes() const { return sampler_.last_step_d2h_bytes(); }

  /// The profiling pass: runs one forward pass at max_num_batched_tokens (a single prompt) in a
  /// temporary cache, so the activation and library peaks are claimed, then returns how many
  /// blocks of `block_size` fit in what `gpu_memory_utilization` leaves. Call before
  /// allocate_kv_cache.
  StatusOr<std::int64_t> profile_num_kv_blocks(double gpu_memory_utilization,
                                               std::int64_t block_size);

 private:
  CudaModelExecutor(const ModelConfig& config, CudaLlamaWeights weights,
                    const ModelExecutorInfo& info, const CudaExecutorOptions& options);
  static StatusOr<std::unique_ptr<CudaModelExecutor>> finish(const ModelConfig& config,
                                                             CudaLlamaWeights weights,
                                                             const CudaExecutorOptions& options);
  Status allocate_activations();
  Status check_batch(const ForwardBatch& batch) const;
  Status run_layers(const ForwardBatch& batch);
  Status attention(const ForwardBatch& batch, std::size_t layer);
  // The LM head over logits rows [first, first + rows) into logits_.
  Status lm_head(const ForwardBatch& batch, std::int64_t first, std::int64_t rows);
  Status compute_logits(const ForwardBatch& batch, float* logits);
  Status forward_and_sample(const ForwardBatch& batch);

  ModelConfig config_;
  CudaLlamaWeights weights_;
  ModelExecutorInfo info_;
  CudaExecutorOptions options_;
  int num_sms_ = 0;
  cuda::CudaStream stream_;
  std::unique_ptr<cuda::BlasLt> blas_;
  CudaStepMetadata metadata_;

  // Activations, options.dtype, rows = max_num_batched_tokens.
  cuda::DeviceBuffer residual_;            // [tokens, hidden]
  cuda::DeviceBuffer normed_;              // [tokens, hidden]
  cuda::DeviceBuffer qkv_;                 // [tokens, (heads + 2 kv_heads) * head_dim]
  cuda::DeviceBuffer attn_;                // [tokens, heads * head_dim]
  cuda::DeviceBuffer proj_;                // [tokens, hidden]
  cuda::DeviceBuffer gate_up_;             // [tokens, 2 * intermediate]
  cuda::DeviceBuffer act_;                 // [tokens, intermediate]
  cuda::DeviceBuffer last_;                // [kLogitsChunk, hidden]
  cuda::DeviceBuffer logits_;              // [kLogitsChunk, vocab], fp32
  kernels::DeviceSampler sampler_;         // slot state, processed logits, step in/out
  Status deferred_error_;                  // from accept_tokens, for the next execute()
  cuda::DeviceBuffer decode_partial_out_;  // split-K partials, fp32
  cuda::DeviceBuffer decode_partial_lse_;
  std::int64_t decode_workspace_floats_ = 0;

  std::vector<cuda::DeviceBuffer> k_cache_;  // [layers] of [blocks, kv_heads, block, head_dim]
  std::vector<cuda::DeviceBuffer> v_cache_;
  std::int64_t num_blocks_ = 0;
  std::int64_t block_size_ = 0;
};

}  // namespace pagoda::models
