// ModelExecutor on an NVIDIA GPU: a registry architecture's layer loop (models/architecture.h)
// over CudaDecoderOps (kernels/ and cuBLASLt), activations in one dtype, linear layers dense in
// it or kept 4-bit / FP8 (cuda_linear_layer.h), a paged KV cache
// per layer whose size comes from a profiling pass and --gpu-memory-utilization. execute() samples
// beside the logits (kernels/sampling/device_sampler.h): per LM-head chunk process -> sample ->
// logprobs on the device, and one copy of token ids and logprobs back per step. Written without a
// GPU at hand: see docs/gpu.md for what has and has not been run on hardware.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/blas_lt.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/step_timer.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/sampling/device_sampler.h"
#include "model/model_files.h"
#include "models/architecture.h"
#include "models/cuda_llama_weights.h"
#include "models/cuda_step_metadata.h"
#include "pagoda/model_executor.h"
#include "quant/load_time_quantization.h"

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
  /// Graphs are captured for decode batches of up to this many sequences (and max_num_seqs).
  std::int64_t max_graph_num_seqs = 512;
  /// Capture stops at the next size once this many seconds have gone; larger batches run eager.
  double graph_capture_time_limit_s = 30.0;
  /// `--quantization`: unquantized linear weights quantized at load (fp8 -> FP8 W8A8, int4 ->
  /// W4A16 with bf16/f16 activations); with dummy weights, the drawn ones quantized layer by
  /// layer (dummy_llama_weights).
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
  /// `--kv-cache-dtype fp8`: K and V as e4m3 codes with each layer's per-tensor scales (the
  /// checkpoint's k_scale / v_scale, else 1), half the bytes per block of a 16-bit cache;
  /// bf16/f16 only.
  kernels::KvCacheStorage kv_cache_storage = kernels::KvCacheStorage::kActivations;
  /// FP8 linear layers take their input's codes from the producing kernel (RMSNorm, the gated
  /// activation) instead of quantizing it themselves; the same bits either way (tests compare).
  bool fuse_fp8_producers = true;
};

/// What the decode CUDA graphs took at start-up.
struct DecodeGraphStats {
  int count = 0;                  ///< graphs captured (one per padded batch size)
  std::int64_t max_num_seqs = 0;  ///< the largest batch a graph serves; larger runs eager
  double capture_seconds = 0.0;   ///< warm-up, capture and instantiation of all of them
  /// Device memory they hold: the free-memory delta of their capture, or the profiling pass's
  /// (graph_memory_reserve) when that is larger (a capture after it reuses its memory).
  std::int64_t device_bytes = 0;
  bool stopped_by_time_limit = false;  ///< graph_capture_time_limit_s cut the list short
};

/// Runs a model of the architecture registry on the current CUDA device.
class CudaModelExecutor final : public ModelExecutor {
 public:
  /// Loads `files`' weights onto the device: linear layers 4-bit, FP8 or dense as their stored
  /// form (or options.quantization) allows, everything else converted to options.dtype.
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
  Status allocate_kv_cache_groups(std::int64_t num_blocks, std::int64_t block_size) override;
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  std::int64_t kv_block_size() const override { return block_size_; }
  Status forward(const ForwardBatch& batch, float* logits) override;

  Status open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) override;
  void close_sampling_slot(std::int32_t slot) override;
  /// A failure (a closed slot, a bad token, a CUDA error) is returned by the next execute().
  void accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) override;
  Status execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                 StepOutput& out) override;
  /// Issues the whole step (metadata, forward pass, sampling, the copy of its results into
  /// pinned memory) without waiting; rows in batch.from_previous_step get their ids on the
  /// device from the previous launched step's sampled tokens.
  Status launch_step(const ForwardBatch& batch, const SamplingBatch& sampling) override;
  /// Waits for the oldest launched step and unpacks its results.
  Status collect_step(StepOutput& out) override;

  /// Bytes the last execute() copied from the device to the host: token ids, the asked-for
  /// logprobs and the raw rows of return_logits rows (forward() copies every row's logits).
  std::int64_t last_step_d2h_bytes() const { return sampler_.last_step_d2h_bytes(); }
  /// CUDA-event times of every forward() and execute() step (StepTimer).
  DeviceTimeStats device_time() const override { return step_timer_.stats(); }

  /// The profiling pass: runs one forward pass at max_num_batched_tokens (a single prompt) in a
  /// temporary cache, so the activation and library peaks are claimed, then returns how many
  /// blocks of `block_size` fit in what `gpu_memory_utilization` leaves. Call before
  /// allocate_kv_cache.
  StatusOr<std::int64_t> profile_num_kv_blocks(double gpu_memory_utilization,
                                               std::int64_t block_size);

  /// The padded decode batch sizes that get a graph: 1, 2, 4, then every multiple of 8 up to
  /// `max_num_seqs` (and max_num_seqs itself), as vLLM pads.
  static std::vector<std::int64_t> decode_graph_sizes(std::int64_t max_num_seqs);
  /// The graphs allocate_kv_cache captured (count 0 with enforce_eager).
  const DecodeGraphStats& decode_graph_stats() const { return graph_stats_; }
  /// Turns replay of the captured graphs off (false) and on again: benchmarks time both on one
  /// executor. The graphs stay captured.
  void set_graphs_enabled(bool enabled) { graphs_enabled_ = enabled; }
  /// Captures the decode graphs again against the current pool (benchmarks: after
  /// kernels::set_pdl_enabled, whose setting a graph keeps).
  Status capture_decode_graphs();
  /// Which attention path each layer's attention() took, counted since creation (eager steps
  /// and graph captures; a graph replay runs no op): tests check that a mixed batch really
  /// split between the kernels, benchmarks say which path they timed.
  struct AttentionPathCounts {
    std::int64_t prefill = 0;  ///< the prefill kernel over every sequence
    std::int64_t decode = 0;   ///< the decode kernel over every sequence
    std::int64_t mixed = 0;    ///< prefill (skipping one-query sequences) + decode over those
  };
  const AttentionPathCounts& attention_path_counts() const { return attention_paths_; }
  /// false: a mixed step runs every sequence's attention through the prefill kernel, as before
  /// the split (benchmarks time both ways on one executor). Default true.
  void set_split_mixed_steps(bool split) { split_mixed_steps_ = split; }
  /// Device bytes profile_num_kv_blocks held back from the KV budget for the graphs.
  std::int64_t graph_memory_reserve() const { return graph_memory_reserve_; }
  /// "28 w4a16 linear layers, 0.07 GiB of weights": the form the weights took on the device.
  std::string weights_summary() const { return weights_.summary(); }
  /// Device bytes of the weights, and of the scratch the quantized linear layers share.
  std::size_t weight_bytes() const { return weights_.device_bytes(); }
  std::size_t linear_scratch_bytes() const { return linear_scratch_.bytes(); }

 private:
  friend class CudaDecoderOps;  // the op set reads the weights, buffers and step metadata

  CudaModelExecutor(const ModelConfig& config, CudaLlamaWeights weights,
                    const ModelExecutorInfo& info, const CudaExecutorOptions& options);
  static StatusOr<std::unique_ptr<CudaModelExecutor>> finish(const ModelConfig& config,
                                                             CudaLlamaWeights weights,
                                                             const CudaExecutorOptions& options);
  // What the layers' launches depend on: a graph bakes this in, the step metadata varies.
  struct LayerShape {
    std::int64_t num_tokens = 0;
    std::int64_t num_seqs = 0;
    std::int64_t block_table_stride = 0;
    std::int64_t max_query_len = 0;
    bool decode = false;  // every sequence brings one query: the split-K decode kernel
    // Some sequences bring one query and some more (decodes beside a prompt chunk): the
    // prefill kernel skips the one-query sequences (skip_single_query) and the decode kernel
    // runs them alone (the metadata's decode_seq_ids, num_decode_seqs of them).
    bool mixed = false;
    std::int64_t num_decode_seqs = 0;
    // A mixed step's sequences first_prefill_seq .. + num_prefill_range - 1: from the first to
    // the last that brings more than one query (one-query ones between them are skipped), so
    // the prefill grid holds no CTA for the decodes around them.
    std::int64_t first_prefill_seq = 0;
    std::int64_t num_prefill_range = 0;
    kernels::DecodeSplitPlan plan;  // the decode kernel's: every sequence, or a mixed step's
                                    // one-query ones
    // The layers of KV groups 1.. read their group's tables (the batch carries kv_groups);
    // otherwise every layer reads group 0's.
    bool kv_groups = false;
  };
  // One captured decode step for batches of up to num_seqs sequences.
  struct DecodeGraph {
    std::int64_t num_seqs = 0;
    int num_splits = 1;
    cuda::CudaGraphExec exec;
  };

  Status allocate_activations();
  // One K and V pool of num_blocks per memory slot (every layer its own, or with `kv_groups`
  // the slots of kv_cache_groups.h, shared by the groups' k-th layers).
  Status allocate_cache(std::int64_t num_blocks, std::int64_t block_size, bool kv_groups);
  // The pools, then the decode graphs, which bake in the pools' addresses and whether the
  // sliding layers read their own group's tables.
  Status allocate_and_capture(std::int64_t num_blocks, std::int64_t block_size, bool kv_groups);
  // Bytes of one cached K or V element: the dtype's, or 1 for an FP8 cache.
  std::int64_t kv_cache_element_bytes() const;
  Status check_batch(const ForwardBatch& batch) const;
  // Uploads the batch's metadata and runs the layers: a graph replay for a decode batch that
  // fits one, eager otherwise.
  Status run_model(const ForwardBatch& batch, std::span<const std::int32_t> previous_pairs);
  // The shape of an eager step; a mixed step's one-query sequences go to `decode_seq_ids`.
  LayerShape eager_shape(const ForwardBatch& batch,
                         std::vector<std::int32_t>& decode_seq_ids) const;
  // The decode kernel's split plan for num_seqs sequences of up to max_seq_len tokens, halved
  // until its partials fit the workspace.
  kernels::DecodeSplitPlan eager_decode_plan(std::int64_t num_seqs, std::int64_t max_seq_len) const;
  const DecodeGraph* graph_for(const ForwardBatch& batch) const;
  // The split count a graph of num_seqs keeps, and a step's partition size under it.
  int graph_num_splits(std::int64_t num_seqs) const;
  std::int32_t graph_partition_size(const DecodeGraph& graph, std::int64_t max_seq_len) const;
  LayerShape graph_shape(std::int64_t num_seqs, int num_splits) const;
  // The architecture's layer loop over CudaDecoderOps: launches only (graph-capturable).
  Status run_layers(const LayerShape& shape);
  // The LM head over logits rows [first, first + rows) into logits_.
  Status lm_head(const ForwardBatch& batch, std::int64_t first, std::int64_t rows);
  Status compute_logits(const ForwardBatch& batch, float* logits);
  Status forward_and_sample(const ForwardBatch& batch, const SamplingBatch& sampling,
                            std::span<const std::int32_t> previous_pairs);
  // execute() in two halves: launch issues the whole step and its copy back without waiting
  // (at most DeviceSampler::kMaxStepsInFlight uncollected); collect waits for the oldest
  // launched step. `previous_pairs`: (token row, previous step's sampling row) of input ids
  // the host does not know yet, taken from the previous step's sampled tokens on the device.
  Status launch(const ForwardBatch& batch, const SamplingBatch& sampling,
                std::span<const std::int32_t> previous_pairs);
  Status collect(StepOutput& out);

  ModelConfig config_;
  const Architecture* architecture_ = nullptr;
  CudaLlamaWeights weights_;
  ModelExecutorInfo info_;
  CudaExecutorOptions options_;
  int num_sms_ = 0;
  cuda::CudaStream stream_;
  std::unique_ptr<cuda::BlasLt> blas_;
  CudaStepMetadata metadata_;

  // Activations, options.dtype, rows = max_num_batched_tokens.
  cuda::DeviceBuffer residual_;  // [tokens, hidden]
  cuda::DeviceBuffer normed_;    // [tokens, hidden]
  cuda::DeviceBuffer qkv_;       // [tokens, (heads + 2 kv_heads) * head_dim]
  cuda::DeviceBuffer attn_;      // [tokens, heads * head_dim]
  cuda::DeviceBuffer proj_;      // [tokens, hidden]
  cuda::DeviceBuffer gate_up_;   // [tokens, 2 * intermediate]
  cuda::DeviceBuffer act_;       // [tokens, intermediate]
  cuda::DeviceBuffer last_;      // [kLogitsChunk, hidden]
  cuda::DeviceBuffer logits_;    // [kLogitsChunk, vocab], fp32
  // The quantized linear layers' scratch (activation codes, act-order gathers, W4A16 split-K
  // partials or its dequantized weight): the most any layer takes at the token budget.
  cuda::DeviceBuffer linear_scratch_;
  // With FP8 linear layers: a producer's fused FP8 output (RMSNorm for QKV and gate/up, the gated
  // activation for down), E4M3 [tokens, max(hidden, intermediate)] and a scale per token;
  // empty otherwise.
  cuda::DeviceBuffer fp8_codes_;
  cuda::DeviceBuffer fp8_scales_;
  kernels::DeviceSampler sampler_;  // slot state, processed logits, step in/out
  cuda::StepTimer step_timer_;
  Status deferred_error_;                  // from accept_tokens, for the next execute()
  cuda::DeviceBuffer decode_partial_out_;  // split-K partials, fp32
  cuda::DeviceBuffer decode_partial_lse_;
  std::int64_t decode_workspace_floats_ = 0;

  std::vector<cuda::DeviceBuffer> k_cache_;  // [slots] of [blocks, kv_heads, block, head_dim]
  std::vector<cuda::DeviceBuffer> v_cache_;
  std::vector<std::int64_t> kv_slot_;  // [layers]: the slot of each layer's pools
  std::int64_t num_blocks_ = 0;
  std::int64_t block_size_ = 0;
  std::vector<std::int64_t> group_windows_;  // KV groups 1..
  // Whether the groups share the pool's slots (batches must then carry kv_groups, and the
  // decode graphs were captured reading the groups' tables).
  bool shared_pool_ = false;
  bool graphs_use_kv_groups_ = false;

  std::vector<std::int32_t> decode_seq_ids_;  // a mixed step's, host side (reused)
  AttentionPathCounts attention_paths_;
  bool split_mixed_steps_ = true;
  std::vector<DecodeGraph> decode_graphs_;  // ascending num_seqs
  bool graphs_enabled_ = true;
  DecodeGraphStats graph_stats_;
  std::int64_t graph_memory_reserve_ = 0;
};

}  // namespace pagoda::models
