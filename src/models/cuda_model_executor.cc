#include "models/cuda_model_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_status.h"
#include "kernels/common/pdl.cuh"
#include "kernels/embedding/embedding.h"
#include "kernels/embedding/previous_tokens.h"
#include "models/cuda_decoder_ops.h"
#include "models/forward_batch_check.h"
#include "models/kv_cache_groups.h"

namespace pagoda::models {

namespace {

using cuda::DeviceBuffer;
using cuda::ScalarType;

// The LM head runs on at most this many rows at a time, bounding the fp32 logits buffer and the
// sampler's processed copy of it (vocab 128256 x 256 rows x 4 B = 131 MB each).
constexpr std::int64_t kLogitsChunk = 256;

StatusOr<DeviceBuffer> allocate(std::int64_t elements, ScalarType type) {
  return DeviceBuffer::allocate(static_cast<std::size_t>(elements) * cuda::scalar_type_size(type));
}

Status check_supported(const ModelConfig& c) {
  PAGODA_RETURN_IF_ERROR(c.validate());
  PAGODA_RETURN_IF_ERROR(architecture_of(c).status());
  if (c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256) {
    return unimplemented("the CUDA backend runs head_dim 64, 128 and 256, this model has " +
                         std::to_string(c.head_dim) + "; use --device cpu");
  }
  return Status::ok_status();
}

}  // namespace

StatusOr<std::unique_ptr<CudaModelExecutor>> CudaModelExecutor::create(
    std::shared_ptr<const ModelFiles> files, const CudaExecutorOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(LlamaWeights host,
                          load_llama_weights(*files, {.quantization = options.quantization}));
  return create_from_weights(files->config, host, options);
}

StatusOr<std::unique_ptr<CudaModelExecutor>> CudaModelExecutor::create_from_weights(
    const ModelConfig& config, const LlamaWeights& weights, const CudaExecutorOptions& options) {
  PAGODA_RETURN_IF_ERROR(check_supported(config));
  if (cuda::cuda_device_count() == 0) return Status(StatusCode::kUnavailable, "no CUDA device");
  PAGODA_ASSIGN_OR_RETURN(CudaLlamaWeights device,
                          upload_llama_weights(config, weights, options.dtype));
  return finish(config, std::move(device), options);
}

StatusOr<std::unique_ptr<CudaModelExecutor>> CudaModelExecutor::create_dummy(
    const ModelConfig& config, const CudaExecutorOptions& options, std::uint64_t seed) {
  PAGODA_RETURN_IF_ERROR(check_supported(config));
  if (cuda::cuda_device_count() == 0) return Status(StatusCode::kUnavailable, "no CUDA device");
  PAGODA_ASSIGN_OR_RETURN(CudaLlamaWeights device,
                          dummy_llama_weights(config, options.dtype, seed, options.quantization));
  return finish(config, std::move(device), options);
}

StatusOr<std::unique_ptr<CudaModelExecutor>> CudaModelExecutor::finish(
    const ModelConfig& c, CudaLlamaWeights weights, const CudaExecutorOptions& options) {
  if (options.max_num_batched_tokens <= 0 || options.max_num_seqs <= 0) {
    return invalid_argument("max_num_batched_tokens and max_num_seqs must be positive");
  }
  if (options.kv_cache_storage == kernels::KvCacheStorage::kFp8E4M3 &&
      options.dtype == ScalarType::kF32) {
    return unimplemented(
        "--kv-cache-dtype fp8 on CUDA needs --dtype bf16 or f16 (its attention kernels read FP8 "
        "codes beside 16-bit activations)");
  }
  ModelExecutorInfo info;
  info.vocab_size = c.vocab_size;
  info.max_model_len =
      options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  if (info.max_model_len <= 0) {
    return invalid_argument("the model does not say its context length; pass --max-model-len");
  }
  info.max_num_batched_tokens = options.max_num_batched_tokens;
  info.num_layers = c.num_hidden_layers;
  info.num_kv_heads = c.num_key_value_heads;
  info.head_dim = c.head_dim;
  set_kv_cache_groups(*find_architecture(c.architecture), c, info);
  std::unique_ptr<CudaModelExecutor> executor(
      new CudaModelExecutor(c, std::move(weights), info, options));
  PAGODA_ASSIGN_OR_RETURN(cuda::DeviceProperties props, cuda::current_device_properties());
  executor->num_sms_ = props.num_sms;
  PAGODA_ASSIGN_OR_RETURN(executor->stream_, cuda::CudaStream::create());
  PAGODA_ASSIGN_OR_RETURN(executor->blas_, cuda::BlasLt::create(options.blas_workspace_bytes));
  PAGODA_ASSIGN_OR_RETURN(executor->step_timer_, cuda::StepTimer::create());
  PAGODA_RETURN_IF_ERROR(executor->allocate_activations());
  return executor;
}

CudaModelExecutor::CudaModelExecutor(const ModelConfig& config, CudaLlamaWeights weights,
                                     const ModelExecutorInfo& info,
                                     const CudaExecutorOptions& options)
    : config_(config),
      architecture_(find_architecture(config.architecture)),
      weights_(std::move(weights)),
      info_(info),
      options_(options) {}

Status CudaModelExecutor::allocate_activations() {
  const ModelConfig& c = config_;
  const ScalarType t = options_.dtype;
  const std::int64_t n = options_.max_num_batched_tokens;
  const std::int64_t q_dim = c.num_attention_heads * c.head_dim;
  const std::int64_t qkv_dim = q_dim + 2 * c.num_key_value_heads * c.head_dim;
  PAGODA_ASSIGN_OR_RETURN(residual_, allocate(n * c.hidden_size, t));
  PAGODA_ASSIGN_OR_RETURN(normed_, allocate(n * c.hidden_size, t));
  PAGODA_ASSIGN_OR_RETURN(qkv_, allocate(n * qkv_dim, t));
  PAGODA_ASSIGN_OR_RETURN(attn_, allocate(n * q_dim, t));
  PAGODA_ASSIGN_OR_RETURN(proj_, allocate(n * c.hidden_size, t));
  PAGODA_ASSIGN_OR_RETURN(gate_up_, allocate(n * 2 * c.intermediate_size, t));
  PAGODA_ASSIGN_OR_RETURN(act_, allocate(n * c.intermediate_size, t));
  PAGODA_ASSIGN_OR_RETURN(last_, allocate(kLogitsChunk * c.hidden_size, t));
  PAGODA_ASSIGN_OR_RETURN(logits_, allocate(kLogitsChunk * c.vocab_size, ScalarType::kF32));
  // Every product has at most max_num_batched_tokens rows (graphs capture fewer), so the most
  // any layer needs up to there covers every step; the profiling pass then counts it as used.
  std::size_t scratch = 0;
  for (const CudaLayerWeights& layer : weights_.layers) {
    for (const CudaLinearLayer* linear : layer.linear_layers()) {
      scratch = std::max(scratch, linear->max_scratch_bytes(n, t));
    }
  }
  scratch = std::max(scratch, weights_.lm_head_layer().max_scratch_bytes(kLogitsChunk, t));
  bool fp8_layers = false;
  for (const CudaLayerWeights& layer : weights_.layers) {
    for (const CudaLinearLayer* linear : layer.linear_layers()) {
      fp8_layers = fp8_layers || linear->kind() == DeviceLinearKind::kFp8;
    }
  }
  if (fp8_layers && options_.fuse_fp8_producers) {
    const std::int64_t widest = std::max(c.hidden_size, c.intermediate_size);
    PAGODA_ASSIGN_OR_RETURN(fp8_codes_,
                            DeviceBuffer::allocate(static_cast<std::size_t>(n * widest)));
    PAGODA_ASSIGN_OR_RETURN(fp8_scales_, allocate(n, ScalarType::kF32));
  }
  if (scratch > 0) {
    PAGODA_ASSIGN_OR_RETURN(linear_scratch_, DeviceBuffer::allocate(scratch));
  }
  PAGODA_ASSIGN_OR_RETURN(
      sampler_, kernels::DeviceSampler::create(
                    {.vocab_size = c.vocab_size, .max_rows = n, .max_chunk_rows = kLogitsChunk}));
  // Split-K partials: splits are used only while seqs x kv-head CTAs < 2 x SMs, so the
  // partial rows stay under (4 x SMs + max_num_seqs) x heads (paged_decode_attention.cu).
  decode_workspace_floats_ =
      (4 * static_cast<std::int64_t>(num_sms_) + options_.max_num_seqs) * q_dim;
  PAGODA_ASSIGN_OR_RETURN(decode_partial_out_,
                          allocate(decode_workspace_floats_, ScalarType::kF32));
  PAGODA_ASSIGN_OR_RETURN(decode_partial_lse_,
                          allocate(decode_workspace_floats_ / c.head_dim + 1, ScalarType::kF32));
  return Status::ok_status();
}

std::int64_t CudaModelExecutor::kv_cache_element_bytes() const {
  return kernels::kv_cache_element_bytes(
      options_.kv_cache_storage, static_cast<std::int64_t>(cuda::scalar_type_size(options_.dtype)));
}

std::int64_t CudaModelExecutor::kv_cache_bytes_per_block(std::int64_t block_size) const {
  return kv_block_bytes(info_, block_size, kv_cache_element_bytes());
}

Status CudaModelExecutor::allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) {
  return allocate_and_capture(num_blocks, block_size, /*kv_groups=*/false);
}

Status CudaModelExecutor::allocate_kv_cache_groups(std::int64_t num_blocks,
                                                   std::int64_t block_size) {
  return allocate_and_capture(num_blocks, block_size, /*kv_groups=*/info_.num_kv_groups() > 1);
}

Status CudaModelExecutor::allocate_and_capture(std::int64_t num_blocks, std::int64_t block_size,
                                               bool kv_groups) {
  PAGODA_RETURN_IF_ERROR(allocate_cache(num_blocks, block_size, kv_groups));
  graphs_use_kv_groups_ = kv_groups;
  if (options_.enforce_eager) return Status::ok_status();
  // The graphs bake in the cache's addresses, so they are captured against this pool.
  PAGODA_RETURN_IF_ERROR(capture_decode_graphs());
  // After a profiling pass the driver hands this capture the memory that pass's graphs took and
  // freed, so the free-memory delta here reads ~0: what they hold is the pass's measurement.
  graph_stats_.device_bytes = std::max(graph_stats_.device_bytes, graph_memory_reserve_);
  return Status::ok_status();
}

Status CudaModelExecutor::allocate_cache(std::int64_t num_blocks, std::int64_t block_size,
                                         bool kv_groups) {
  PAGODA_RETURN_IF_ERROR(check_kv_cache_shape(num_blocks, block_size));
  decode_graphs_.clear();
  graph_stats_ = {};
  k_cache_.clear();
  v_cache_.clear();
  num_blocks_ = 0;
  block_size_ = 0;
  if (kv_groups) {
    kv_slot_ = kv_cache_slots(info_);
  } else {
    kv_slot_.resize(static_cast<std::size_t>(info_.num_layers));
    for (std::int64_t layer = 0; layer < info_.num_layers; ++layer) kv_slot_[layer] = layer;
  }
  const std::int64_t num_slots = *std::max_element(kv_slot_.begin(), kv_slot_.end()) + 1;
  const auto bytes = static_cast<std::size_t>(num_blocks * block_size * info_.num_kv_heads *
                                              info_.head_dim * kv_cache_element_bytes());
  for (std::int64_t slot = 0; slot < num_slots; ++slot) {
    auto k = DeviceBuffer::allocate(bytes);
    auto v = DeviceBuffer::allocate(bytes);
    if (!k.ok() || !v.ok()) {
      k_cache_.clear();
      v_cache_.clear();
      return Status(StatusCode::kResourceExhausted,
                    "cannot allocate a GPU KV cache of " + std::to_string(num_blocks) +
                        " blocks; lower --gpu-memory-utilization's share for the cache or "
                        "--max-model-len");
    }
    k_cache_.push_back(std::move(*k));
    v_cache_.push_back(std::move(*v));
  }
  const std::int64_t max_blocks_per_seq = (info_.max_model_len + block_size - 1) / block_size;
  PAGODA_ASSIGN_OR_RETURN(
      metadata_, CudaStepMetadata::create({.max_tokens = options_.max_num_batched_tokens,
                                           .max_seqs = options_.max_num_seqs,
                                           .max_blocks_per_seq = max_blocks_per_seq,
                                           .num_extra_kv_groups = info_.num_kv_groups() - 1}));
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  group_windows_.assign(info_.kv_group_windows.begin() + 1, info_.kv_group_windows.end());
  shared_pool_ = kv_groups;
  return Status::ok_status();
}

StatusOr<std::int64_t> CudaModelExecutor::profile_num_kv_blocks(double gpu_memory_utilization,
                                                                std::int64_t block_size) {
  if (block_size <= 0) return invalid_argument("--block-size must be positive");
  const std::int64_t tokens = std::min(options_.max_num_batched_tokens, info_.max_model_len);
  const std::int64_t blocks = (tokens + block_size - 1) / block_size;
  PAGODA_RETURN_IF_ERROR(allocate_cache(blocks, block_size, /*kv_groups=*/false));
  graphs_use_kv_groups_ = false;
  ForwardBatch batch;
  for (std::int64_t i = 0; i < tokens; ++i) {
    batch.token_ids.push_back(static_cast<std::int32_t>(i % info_.vocab_size));
    batch.positions.push_back(static_cast<std::int32_t>(i));
    batch.slot_mapping.push_back(i);
  }
  batch.query_start_loc = {0, static_cast<std::int32_t>(tokens)};
  batch.seq_lens = {static_cast<std::int32_t>(tokens)};
  batch.max_blocks_per_seq = blocks;
  for (std::int64_t b = 0; b < blocks; ++b)
    batch.block_tables.push_back(static_cast<std::int32_t>(b));
  batch.logits_indices = {static_cast<std::int32_t>(tokens - 1)};
  std::vector<float> logits(static_cast<std::size_t>(info_.vocab_size));
  PAGODA_RETURN_IF_ERROR(forward(batch, logits.data()));
  // The graphs' own memory, measured by capturing them against the temporary cache: the real
  // ones, captured after the pool, take the same, so the pool leaves room for them.
  graph_memory_reserve_ = 0;
  if (!options_.enforce_eager) {
    PAGODA_RETURN_IF_ERROR(capture_decode_graphs());
    graph_memory_reserve_ = graph_stats_.device_bytes;
    decode_graphs_.clear();
    graph_stats_ = {};
  }
  // The temporary cache goes back before the budget is read.
  k_cache_.clear();
  v_cache_.clear();
  num_blocks_ = 0;
  PAGODA_ASSIGN_OR_RETURN(std::int64_t budget, cuda::kv_cache_budget_bytes(gpu_memory_utilization));
  budget -= graph_memory_reserve_;
  if (budget <= 0) {
    return Status(StatusCode::kResourceExhausted,
                  "no GPU memory left for the KV cache after the CUDA graphs; raise "
                  "--gpu-memory-utilization or pass --enforce-eager");
  }
  return budget / kv_cache_bytes_per_block(block_size);
}

Status CudaModelExecutor::check_batch(const ForwardBatch& batch) const {
  if (num_blocks_ == 0) {
    return Status(StatusCode::kFailedPrecondition, "a step before allocate_kv_cache()");
  }
  if (batch.kv_groups.empty() && shared_pool_) {
    return invalid_argument(
        "forward batch: the KV groups share one pool, so the batch must "
        "carry each group's block tables (kv_groups)");
  }
  return check_forward_batch(batch, {.vocab_size = info_.vocab_size,
                                     .max_model_len = info_.max_model_len,
                                     .max_num_batched_tokens = info_.max_num_batched_tokens,
                                     .num_blocks = num_blocks_,
                                     .block_size = block_size_,
                                     .group_windows = group_windows_});
}

Status CudaModelExecutor::forward(const ForwardBatch& batch, float* logits) {
  PAGODA_RETURN_IF_ERROR(check_batch(batch));
  if (batch.num_tokens() == 0) return Status::ok_status();
  PAGODA_RETURN_IF_ERROR(step_timer_.begin(stream_.get()));
  Status s = run_model(batch, {});
  if (s.ok()) s = compute_logits(batch, logits);
  if (!s.ok()) {
    step_timer_.cancel();
    return s;
  }
  return step_timer_.collect();
}

Status CudaModelExecutor::run_model(const ForwardBatch& batch,
                                    std::span<const std::int32_t> previous_pairs) {
  const DecodeGraph* graph = graph_for(batch);
  if (graph != nullptr) {
    const std::int64_t max_seq_len =
        *std::max_element(batch.seq_lens.begin(), batch.seq_lens.end());
    PAGODA_RETURN_IF_ERROR(metadata_.upload_padded_decode(batch, graph->num_seqs,
                                                          graph_partition_size(*graph, max_seq_len),
                                                          stream_.get(), previous_pairs));
  }
  LayerShape shape;
  if (graph == nullptr) {
    shape = eager_shape(batch, decode_seq_ids_);
    PAGODA_RETURN_IF_ERROR(metadata_.upload(batch, stream_.get(), previous_pairs, decode_seq_ids_));
  }
  // Input ids the host does not know yet: from the previous step's sampled tokens, still on
  // the device (this step's sampling has not run, so they are intact).
  PAGODA_RETURN_IF_ERROR(kernels::launch_gather_previous_tokens(
      {.token_ids = metadata_.mutable_token_ids(),
       .pairs = metadata_.previous_token_pairs(),
       .previous = sampler_.last_tokens_device(),
       .num_pairs = static_cast<std::int64_t>(previous_pairs.size() / 2)},
      stream_.get()));
  if (graph != nullptr) return graph->exec.launch(stream_.get());
  return run_layers(shape);
}

// Host-side planning from the batch the host already holds: no device reads. The decode kernel
// writes one row per sequence, so it takes a sequence only if it brings exactly one query:
//
//   q_len per sequence   1 1 1 1      -> decode: the decode kernel over all
//                        1 1 512 1    -> mixed: prefill over seq 2, decode over seqs {0, 1, 3}
//                        1 30 1 512 1 -> mixed: prefill over seqs 1..3 skipping seq 2, decode
//                                        over seqs {0, 2, 4}
//                        7 512        -> prefill over all
CudaModelExecutor::LayerShape CudaModelExecutor::eager_shape(
    const ForwardBatch& batch, std::vector<std::int32_t>& decode_seq_ids) const {
  LayerShape shape{.num_tokens = batch.num_tokens(),
                   .num_seqs = batch.num_seqs(),
                   .block_table_stride = batch.max_blocks_per_seq,
                   .kv_groups = !batch.kv_groups.empty()};
  decode_seq_ids.clear();
  std::int64_t max_decode_seq_len = 0;
  std::int64_t first_prefill = -1, last_prefill = -1;
  for (std::int64_t s = 0; s < batch.num_seqs(); ++s) {
    const std::int64_t q_len = batch.query_start_loc[s + 1] - batch.query_start_loc[s];
    shape.max_query_len = std::max(shape.max_query_len, q_len);
    if (q_len == 1) {
      decode_seq_ids.push_back(static_cast<std::int32_t>(s));
      max_decode_seq_len = std::max<std::int64_t>(max_decode_seq_len, batch.seq_lens[s]);
    } else if (q_len > 1) {
      if (first_prefill < 0) first_prefill = s;
      last_prefill = s;
    }
  }
  const auto num_single = static_cast<std::int64_t>(decode_seq_ids.size());
  shape.decode = num_single > 0 && num_single == batch.num_seqs();
  shape.mixed = split_mixed_steps_ && num_single > 0 && num_single < batch.num_seqs();
  // Only a mixed step reads the list (a pure decode runs every sequence in order).
  if (!shape.mixed) decode_seq_ids.clear();
  if (!shape.decode && !shape.mixed) return shape;
  if (shape.mixed && first_prefill >= 0) {
    shape.first_prefill_seq = first_prefill;
    shape.num_prefill_range = last_prefill - first_prefill + 1;
  }
  shape.num_decode_seqs = num_single;
  shape.plan = eager_decode_plan(num_single, max_decode_seq_len);
  return shape;
}

kernels::DecodeSplitPlan CudaModelExecutor::eager_decode_plan(std::int64_t num_seqs,
                                                              std::int64_t max_seq_len) const {
  const ModelConfig& c = config_;
  kernels::DecodeSplitPlan plan =
      kernels::plan_decode_splits(num_seqs, c.num_key_value_heads, c.num_attention_heads,
                                  max_seq_len, num_sms_, options_.max_decode_splits);
  while (plan.num_splits > 1 &&
         kernels::decode_workspace_floats(num_seqs, c.num_attention_heads, c.head_dim, plan) >
             decode_workspace_floats_) {
    plan = kernels::decode_plan_with_splits(max_seq_len, std::max(1, plan.num_splits / 2));
  }
  return plan;
}

Status CudaModelExecutor::open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) {
  return sampler_.open_slot(slot, config, stream_.get());
}

void CudaModelExecutor::close_sampling_slot(std::int32_t slot) {
  sampler_.close_slot(slot);
}

void CudaModelExecutor::accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) {
  Status s = sampler_.accept_tokens(slot, tokens, stream_.get());
  if (!s.ok() && deferred_error_.ok()) deferred_error_ = std::move(s);
}

Status CudaModelExecutor::execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                                  StepOutput& out) {
  PAGODA_RETURN_IF_ERROR(launch(batch, sampling, {}));
  return collect(out);
}

Status CudaModelExecutor::launch_step(const ForwardBatch& batch, const SamplingBatch& sampling) {
  const auto& previous = batch.from_previous_step;
  for (const PreviousToken& p : previous) {
    if (p.token_row < 0 || p.token_row >= batch.num_tokens() || p.previous_row < 0 ||
        p.previous_row >= sampler_.last_step_rows()) {
      return invalid_argument("launch_step: token row " + std::to_string(p.token_row) +
                              " takes row " + std::to_string(p.previous_row) +
                              " of the previous step, which sampled " +
                              std::to_string(sampler_.last_step_rows()) + " rows");
    }
  }
  // PreviousToken is two int32s (forward_batch.h asserts it): the gather kernel's pairs.
  const std::span<const std::int32_t> pairs(reinterpret_cast<const std::int32_t*>(previous.data()),
                                            2 * previous.size());
  return launch(batch, sampling, pairs);
}

Status CudaModelExecutor::collect_step(StepOutput& out) {
  return collect(out);
}

// The step: the sampling rows go up first (so a bad row fails before any work), then the
// forward pass, then per LM-head chunk the sampler, then the copy of the results back; nothing
// waits for the device, so the host can plan the next step while this one runs.
Status CudaModelExecutor::launch(const ForwardBatch& batch, const SamplingBatch& sampling,
                                 std::span<const std::int32_t> previous_pairs) {
  if (!deferred_error_.ok()) return std::exchange(deferred_error_, Status::ok_status());
  PAGODA_RETURN_IF_ERROR(check_batch(batch));
  if (sampling.rows.size() != batch.logits_indices.size()) {
    return invalid_argument("execute: " + std::to_string(sampling.rows.size()) +
                            " sampling rows for " + std::to_string(batch.logits_indices.size()) +
                            " logits rows");
  }
  if (sampler_.steps_in_flight() >= kernels::DeviceSampler::kMaxStepsInFlight) {
    return Status(StatusCode::kFailedPrecondition,
                  "launch: " + std::to_string(sampler_.steps_in_flight()) +
                      " steps are already in flight; collect one first");
  }
  PAGODA_RETURN_IF_ERROR(step_timer_.begin(stream_.get()));
  Status s = sampler_.begin_step(sampling, stream_.get());
  if (s.ok()) s = forward_and_sample(batch, sampling, previous_pairs);
  if (s.ok()) s = step_timer_.end(stream_.get());
  if (s.ok()) s = sampler_.end_step(stream_.get());
  if (!s.ok()) {
    step_timer_.cancel();
    // The pinned buffers are reused by later steps: let the copies in flight finish.
    (void)stream_.synchronize();
    return s;
  }
  return Status::ok_status();
}

Status CudaModelExecutor::collect(StepOutput& out) {
  Status s = sampler_.collect_step(out);
  if (s.ok()) s = step_timer_.collect();
  if (!s.ok()) step_timer_.cancel();
  return s;
}

Status CudaModelExecutor::forward_and_sample(const ForwardBatch& batch,
                                             const SamplingBatch& sampling,
                                             std::span<const std::int32_t> previous_pairs) {
  if (batch.num_tokens() == 0) return Status::ok_status();
  PAGODA_RETURN_IF_ERROR(run_model(batch, previous_pairs));
  // The host fills structured outputs' masks while the device runs the layers.
  PAGODA_RETURN_IF_ERROR(sampler_.stage_masks(sampling, stream_.get()));
  for (std::int64_t r0 = 0; r0 < batch.num_logits(); r0 += kLogitsChunk) {
    const std::int64_t rows = std::min(kLogitsChunk, batch.num_logits() - r0);
    PAGODA_RETURN_IF_ERROR(lm_head(batch, r0, rows));
    PAGODA_RETURN_IF_ERROR(sampler_.sample_chunk(logits_.as<float>(), r0, rows, stream_.get()));
  }
  return Status::ok_status();
}

Status CudaModelExecutor::run_layers(const LayerShape& shape) {
  CudaDecoderOps ops(*this, shape);
  return architecture_->forward(ops, config_);
}

// Gathers logits rows [first, first + rows) of the hidden states and runs the LM head on them,
// fp32 out, into logits_.
Status CudaModelExecutor::lm_head(const ForwardBatch& batch, std::int64_t first,
                                  std::int64_t rows) {
  const ModelConfig& c = config_;
  const ScalarType t = options_.dtype;
  const cudaStream_t stream = stream_.get();
  PAGODA_RETURN_IF_ERROR(kernels::launch_embedding({.table = normed_.data(),
                                                    .ids = metadata_.logits_indices() + first,
                                                    .out = last_.data(),
                                                    .num_table_rows = batch.num_tokens(),
                                                    .num_tokens = rows,
                                                    .hidden = c.hidden_size,
                                                    .dtype = t},
                                                   stream));
  return weights_.lm_head_layer().forward(last_.data(), rows, nullptr, logits_.data(), t, *blas_,
                                          {linear_scratch_.data(), linear_scratch_.bytes()}, stream,
                                          /*y_fp32=*/true);
}

// The LM head chunk by chunk, each chunk's logits copied to the caller.
Status CudaModelExecutor::compute_logits(const ForwardBatch& batch, float* logits) {
  const std::int64_t vocab = config_.vocab_size;
  for (std::int64_t r0 = 0; r0 < batch.num_logits(); r0 += kLogitsChunk) {
    const std::int64_t rows = std::min(kLogitsChunk, batch.num_logits() - r0);
    PAGODA_RETURN_IF_ERROR(lm_head(batch, r0, rows));
    PAGODA_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        logits + r0 * vocab, logits_.data(), static_cast<std::size_t>(rows * vocab) * sizeof(float),
        cudaMemcpyDeviceToHost, stream_.get()));
  }
  PAGODA_RETURN_IF_ERROR(step_timer_.end(stream_.get()));
  // Also what makes the pinned metadata buffer free for the next step.
  return stream_.synchronize();
}

}  // namespace pagoda::models
