// A ForwardBatch's index arrays on the device: planned on the host, packed into one pinned
// buffer, sent with one copy per step into device buffers of fixed capacity allocated once. The
// device addresses never change, which is what lets a later decode step be captured as a CUDA
// graph and replayed with new contents.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "pagoda/forward_batch.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Fixed-capacity device copies of token ids, positions, slot mapping, query_start_loc,
/// seq_lens, block tables and logits indices, and of the block tables and slot mapping of the
/// KV groups after the first (ForwardBatch::kv_groups: a model's sliding-window layers).
class CudaStepMetadata {
 public:
  /// The most any one step may carry.
  struct Capacity {
    std::int64_t max_tokens = 0;
    std::int64_t max_seqs = 0;
    std::int64_t max_blocks_per_seq = 0;
    std::int64_t num_extra_kv_groups = 0;  ///< Groups with their own tables besides group 0.
  };

  CudaStepMetadata() = default;
  static StatusOr<CudaStepMetadata> create(const Capacity& capacity);

  /// Packs `batch` and issues its host-to-device copy on `stream`. The pinned staging rotates
  /// over kPinnedBuffers, so an upload may be issued while the copies of the
  /// kPinnedBuffers - 1 before it are in flight (overlapped steps); the caller synchronizes
  /// before reusing one further back. INVALID_ARGUMENT when the batch exceeds the capacity.
  /// `previous_pairs`: the (token row, previous step's sampling row) pairs of tokens the host
  /// does not know yet, flattened; their ids come from the previous step's sampled tokens on
  /// the device (kernels::launch_gather_previous_tokens over previous_token_pairs()).
  /// `decode_seq_ids`: a mixed step's sequences that bring one query (indices into the batch),
  /// for the decode kernel (decode_seq_ids()); they travel in the same copy.
  Status upload(const ForwardBatch& batch, cudaStream_t stream,
                std::span<const std::int32_t> previous_pairs = {},
                std::span<const std::int32_t> decode_seq_ids = {});

  /// Like upload(), for a decode batch (one token per sequence) replayed by the CUDA graph of
  /// `padded_seqs` >= batch.num_seqs() sequences: the rows past the batch are padding (token 0,
  /// position 0, no KV slot, seq_len 0, query row = their index) and the block tables keep the
  /// fixed stride max_blocks_per_seq() whatever the batch's own. `decode_partition_size` goes
  /// to decode_partition_size() for the split-K decode kernel.
  Status upload_padded_decode(const ForwardBatch& batch, std::int64_t padded_seqs,
                              std::int32_t decode_partition_size, cudaStream_t stream,
                              std::span<const std::int32_t> previous_pairs = {});

  /// [2 * n]: the previous_pairs of the last upload.
  const std::int32_t* previous_token_pairs() const { return at<std::int32_t>(previous_pairs_); }

  static constexpr int kPinnedBuffers = 3;

  /// The block-table stride of upload_padded_decode's steps (the capacity's).
  std::int64_t max_blocks_per_seq() const { return capacity_.max_blocks_per_seq; }

  const std::int32_t* token_ids() const { return at<std::int32_t>(token_ids_); }  ///< [num_tokens]
  /// The same, for the kernel that fills in ids the host did not know (previous_token_pairs()).
  std::int32_t* mutable_token_ids() {
    return reinterpret_cast<std::int32_t*>(static_cast<std::uint8_t*>(device_.data()) + token_ids_);
  }
  const std::int32_t* positions() const { return at<std::int32_t>(positions_); }  ///< [num_tokens]
  const std::int64_t* slot_mapping() const {
    return at<std::int64_t>(slot_mapping_);
  }  ///< [num_tokens]
  const std::int32_t* query_start_loc() const {
    return at<std::int32_t>(query_start_loc_);
  }                                                                             ///< [num_seqs + 1]
  const std::int32_t* seq_lens() const { return at<std::int32_t>(seq_lens_); }  ///< [num_seqs]
  /// [num_seqs, batch.max_blocks_per_seq], row-major with the batch's own stride.
  const std::int32_t* block_tables() const { return at<std::int32_t>(block_tables_); }
  /// KV group g + 1's slot mapping, [num_tokens] (batch.kv_groups[g]; g < num_extra_kv_groups).
  const std::int64_t* group_slot_mapping(std::size_t g) const {
    return at<std::int64_t>(group_slot_mapping_[g]);
  }
  /// KV group g + 1's block tables, laid out as block_tables() (-1 below each window).
  const std::int32_t* group_block_tables(std::size_t g) const {
    return at<std::int32_t>(group_block_tables_[g]);
  }
  const std::int32_t* logits_indices() const {
    return at<std::int32_t>(logits_indices_);
  }  ///< [num_logits]
  /// One int: the decode partition size of the last upload_padded_decode.
  const std::int32_t* decode_partition_size() const { return at<std::int32_t>(partition_size_); }
  /// [n]: the decode_seq_ids of the last upload (a mixed step's one-query sequences).
  const std::int32_t* decode_seq_ids() const { return at<std::int32_t>(decode_seq_ids_); }

 private:
  template <typename T>
  const T* at(std::size_t offset) const {
    return reinterpret_cast<const T*>(static_cast<const std::uint8_t*>(device_.data()) + offset);
  }

  Capacity capacity_;
  // Byte offsets of each array inside both buffers (the same layout host and device).
  std::size_t slot_mapping_ = 0, token_ids_ = 0, positions_ = 0, query_start_loc_ = 0,
              seq_lens_ = 0, block_tables_ = 0, logits_indices_ = 0, partition_size_ = 0,
              decode_seq_ids_ = 0, previous_pairs_ = 0, total_ = 0;
  // Per extra KV group: its slot mapping (before block_tables_, so the fixed-size part of a
  // padded decode upload carries it) and its block tables (after block_tables_).
  std::vector<std::size_t> group_slot_mapping_, group_block_tables_;
  std::array<cuda::PinnedHostBuffer, kPinnedBuffers> pinned_;
  int next_pinned_ = 0;  // the staging buffer the next upload packs
  Status put_previous_pairs(std::uint8_t* base, std::span<const std::int32_t> pairs) const;
  std::uint8_t* staging() { return static_cast<std::uint8_t*>(pinned_[next_pinned_].data()); }
  cuda::DeviceBuffer device_;
};

}  // namespace pagoda::models
