// The interface the engine drives to run a model: size and allocate the paged KV cache, then run
// steps over scheduled batches, each a forward pass and a sample beside the logits
// (pagoda/step_sampling.h), so only token ids and asked-for logprobs reach the host. The CPU
// executor (src/models/cpu_model_executor.h) and the CUDA one sit behind the same calls; both
// sample through the same rules, the CPU sampler (src/sampling/host_sampler.h) being the oracle.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "pagoda/forward_batch.h"
#include "pagoda/step_sampling.h"
#include "pagoda/status.h"

namespace pagoda {

/// What an executor can run, fixed when it is built.
struct ModelExecutorInfo {
  std::int64_t vocab_size = 0;              ///< Columns of every logits row.
  std::int64_t max_model_len = 0;           ///< Longest sequence (prompt + output), in tokens.
  std::int64_t max_num_batched_tokens = 0;  ///< Most tokens one forward() may carry.
  std::int64_t num_layers = 0;              ///< Layers holding a K and a V pool each.
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
};

/// Bytes one KV block of `block_size` tokens takes across `info`'s layers (K and V), at
/// `element_bytes` per stored value: what every executor's kv_cache_bytes_per_block reports.
inline std::int64_t kv_block_bytes(const ModelExecutorInfo& info, std::int64_t block_size,
                                   std::int64_t element_bytes) {
  return 2 * info.num_layers * block_size * info.num_kv_heads * info.head_dim * element_bytes;
}

/// allocate_kv_cache's argument check: INVALID_ARGUMENT unless both are positive.
inline Status check_kv_cache_shape(std::int64_t num_blocks, std::int64_t block_size) {
  if (num_blocks > 0 && block_size > 0) return Status::ok_status();
  return invalid_argument("the KV cache needs a positive number of blocks and block size, got " +
                          std::to_string(num_blocks) + " blocks of " + std::to_string(block_size));
}

/// Where a device executor's time went since it was built: busy from each step's first device
/// operation to its last, idle from one step's end to the next one's start (the device waiting
/// for the host). A gap of over kDeviceIdleGapSeconds counts as the engine having no work, not
/// as idle. Executors without a separate device report zeros.
struct DeviceTimeStats {
  static constexpr double kDeviceIdleGapSeconds = 0.05;
  std::int64_t steps = 0;
  double busy_seconds = 0.0;
  double idle_seconds = 0.0;
};

/// Runs one model's forward passes; not thread-safe (the engine's step loop owns it).
class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  /// Sizes and limits of this model and executor.
  virtual const ModelExecutorInfo& info() const = 0;

  /// Bytes one KV block of `block_size` tokens takes across all layers (K and V), so the engine
  /// can turn a memory budget into a block count.
  virtual std::int64_t kv_cache_bytes_per_block(std::int64_t block_size) const = 0;

  /// Allocates `num_blocks` blocks of `block_size` tokens per layer, replacing any earlier pool.
  /// RESOURCE_EXHAUSTED when the memory is not there.
  virtual Status allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) = 0;

  /// Blocks in the allocated pool (0 before allocate_kv_cache).
  virtual std::int64_t num_kv_blocks() const = 0;
  /// Tokens per block of the allocated pool (0 before allocate_kv_cache).
  virtual std::int64_t kv_block_size() const = 0;

  /// Runs the batch: stores its K/V at slot_mapping, then writes one row of fp32 logits per
  /// logits_indices entry, in that order. INVALID_ARGUMENT for an inconsistent batch,
  /// FAILED_PRECONDITION before allocate_kv_cache. The serving path is execute(); this one stays
  /// for perplexity, draft models and tests.
  virtual Status forward(const ForwardBatch& batch,
                         float* logits /* [num_logits, vocab_size] */) = 0;

  /// Opens `slot` (>= 0, dense: the engine hands out the lowest free one) for a request with
  /// `config`; the executor keeps its penalty counts from here until close_sampling_slot.
  /// INVALID_ARGUMENT for a bad token id in `config`.
  virtual Status open_sampling_slot(std::int32_t slot, const SlotSamplingConfig& config) = 0;
  /// Forgets a slot; no-op when it is not open.
  virtual void close_sampling_slot(std::int32_t slot) = 0;
  /// Tokens `slot`'s request took that execute() did not sample (verified drafts), so its
  /// penalty counts stay true.
  virtual void accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens) = 0;

  /// forward() and a sample beside the logits: one row of `sampling` per logits_indices entry
  /// (every row's slot open). Sampled and forced tokens count for their slot's penalties.
  virtual Status execute(const ForwardBatch& batch, const SamplingBatch& sampling,
                         StepOutput& out) = 0;

  /// Device busy and idle time over the steps so far (zeros where there is no device).
  virtual DeviceTimeStats device_time() const { return {}; }
};

}  // namespace pagoda
