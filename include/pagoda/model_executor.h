// The interface the engine drives to run a model: size and allocate the paged KV cache, then run
// steps over scheduled batches, each a forward pass and a sample beside the logits
// (pagoda/step_sampling.h), so only token ids and asked-for logprobs reach the host. The CPU
// executor (src/models/cpu_model_executor.h) and the CUDA one sit behind the same calls; both
// sample through the same rules, the CPU sampler (src/sampling/host_sampler.h) being the oracle.
//
// Overlapped steps (--async-scheduling) split execute() in two: launch_step starts a step and
// collect_step waits for the oldest launched one, so the host plans step N+1 while the device
// runs step N:
//
//   host    schedule N+1 | launch N+1 | collect N, outputs of N | schedule N+2 | launch N+2 ...
//   device  ...... step N ............| step N+1 ...............................| step N+2
//
// At most kMaxStepsInFlight (2) steps are launched and not collected; the engine launches N+1
// while N is in flight, then collects N. Steps run and are collected in launch order, each step
// done with the KV cache before the next one touches it (one stream). A decode row of N+1 whose
// input is the token N samples names it in ForwardBatch::from_previous_step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/forward_batch.h"
#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda {

/// What an executor can run, fixed when it is built.
struct ModelExecutorInfo {
  std::int64_t vocab_size = 0;              ///< Columns of every logits row.
  std::int64_t max_model_len = 0;           ///< Longest sequence (prompt + output), in tokens.
  std::int64_t max_num_batched_tokens = 0;  ///< Most tokens one forward() may carry.
  std::int64_t num_layers = 0;              ///< Layers holding a K and a V pool each.
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  /// KV-cache groups (docs/kv_cache_groups.md): the layers of a group share one block table and
  /// one pool of blocks. kv_group_windows[g] is group g's sliding window, 0 for layers that see
  /// every position; group 0 holds the full layers. One group {0} for a model without sliding
  /// layers (and for one whose layers all slide: it keeps a full table).
  std::vector<std::int64_t> kv_group_windows{0};
  /// [num_layers] each layer's group; empty means every layer is in group 0.
  std::vector<std::int32_t> kv_group_of_layer;

  /// Groups, at least 1.
  std::int64_t num_kv_groups() const { return static_cast<std::int64_t>(kv_group_windows.size()); }
  /// Layers of group `group`.
  std::int64_t num_layers_in_kv_group(std::int64_t group) const {
    if (kv_group_of_layer.empty()) return group == 0 ? num_layers : 0;
    return static_cast<std::int64_t>(
        std::count(kv_group_of_layer.begin(), kv_group_of_layer.end(), group));
  }
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
  /// RESOURCE_EXHAUSTED when the memory is not there. Every layer has its own pool and uses
  /// group 0's table (a batch's kv_groups, if any, must then name blocks of the same pools).
  virtual Status allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) = 0;

  /// KV groups (info().kv_group_*; docs/kv_cache_groups.md): one pool of `num_blocks` blocks
  /// shared by the groups, each block a page of S layers' memory (S the most layers in a group;
  /// the k-th layer of every group uses slot k), so the groups' tables must never name a block
  /// twice and batches must carry ForwardBatch::kv_groups. This default serves executors of one
  /// group.
  virtual Status allocate_kv_cache_groups(std::int64_t num_blocks, std::int64_t block_size) {
    if (info().num_kv_groups() != 1) {
      return unimplemented("this executor keeps one KV pool per layer");
    }
    return allocate_kv_cache(num_blocks, block_size);
  }

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

  /// Steps launched and not yet collected, at most.
  static constexpr std::size_t kMaxStepsInFlight = 2;

  /// Starts execute(batch, sampling) and returns without waiting for its tokens. The rows in
  /// batch.from_previous_step take their ids from the tokens the previous launched step sampled
  /// (collected or not). Neither argument is read after the call returns. FAILED_PRECONDITION
  /// with kMaxStepsInFlight steps uncollected; an error means the step was not launched.
  /// This default runs execute() at once (a host executor has nothing to overlap with) and
  /// keeps its output for collect_step; a device executor overrides both halves.
  virtual Status launch_step(const ForwardBatch& batch, const SamplingBatch& sampling) {
    if (launched_.size() >= kMaxStepsInFlight) {
      return Status(StatusCode::kFailedPrecondition,
                    "launch_step: " + std::to_string(launched_.size()) +
                        " steps are already in flight; collect one first");
    }
    const ForwardBatch* run = &batch;
    if (!batch.from_previous_step.empty()) {
      resolved_ = batch;
      resolved_.from_previous_step.clear();
      for (const PreviousToken& p : batch.from_previous_step) {
        if (p.token_row < 0 || p.token_row >= batch.num_tokens() || p.previous_row < 0 ||
            static_cast<std::size_t>(p.previous_row) >= previous_tokens_.size() ||
            previous_tokens_[static_cast<std::size_t>(p.previous_row)] < 0) {
          return invalid_argument("launch_step: token row " + std::to_string(p.token_row) +
                                  " takes previous row " + std::to_string(p.previous_row) +
                                  ", which the previous step did not sample");
        }
        resolved_.token_ids[static_cast<std::size_t>(p.token_row)] =
            previous_tokens_[static_cast<std::size_t>(p.previous_row)];
      }
      run = &resolved_;
    }
    StepOutput& out = launched_.emplace_back();
    if (Status s = execute(*run, sampling, out); !s.ok()) {
      launched_.pop_back();
      previous_tokens_.clear();
      return s;
    }
    previous_tokens_ = out.token_ids;
    return Status::ok_status();
  }

  /// Waits for the oldest launched step and hands back its output (as execute() would have).
  /// FAILED_PRECONDITION when none is in flight; an error from the step itself otherwise (the
  /// step is gone either way).
  virtual Status collect_step(StepOutput& out) {
    if (launched_.empty()) {
      return Status(StatusCode::kFailedPrecondition, "collect_step: no step is in flight");
    }
    std::swap(out, launched_.front());  // both keep their capacity
    launched_.pop_front();
    return Status::ok_status();
  }

  /// Device busy and idle time over the steps so far (zeros where there is no device).
  virtual DeviceTimeStats device_time() const { return {}; }

 private:
  // State of the default launch_step / collect_step only.
  std::deque<StepOutput> launched_;            // outputs not yet collected, oldest first
  std::vector<std::int32_t> previous_tokens_;  // the last launched step's sampled ids
  ForwardBatch resolved_;                      // a batch with its in-flight ids filled in
};

}  // namespace pagoda
