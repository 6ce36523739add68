// The open sampling slots' lifelong state on the device (layout in sampling_layout.h), sent once
// when a slot opens: its SlotRecord, its logit_bias and min_tokens lists in a shared arena, and,
// only for slots with penalties, a [vocab] row of output counts and a prompt bitset from a pool.
//
// Memory stays bounded by what is open: the arena is compacted (and only then grown) when a new
// slot's lists do not fit after the last one, and penalty rows are reused through a free list,
// the pool doubling only when every row is taken. With vocab 151,936 a penalty row is 612 KiB.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "kernels/sampling/sampling_layout.h"
#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda::kernels {

/// Slot records, lists and penalty rows on the device; host calls issue their copies on the
/// stream they are given. Not thread-safe.
class SamplingSlotTable {
 public:
  SamplingSlotTable() = default;
  explicit SamplingSlotTable(std::int64_t vocab_size) : vocab_size_(vocab_size) {}

  std::int64_t vocab_size() const { return vocab_size_; }

  /// Opens `slot` with `config`, as HostSampler::open_slot: INVALID_ARGUMENT for a negative or
  /// open slot, a token id outside the vocabulary or a bias listing a token twice;
  /// RESOURCE_EXHAUSTED when the device has no room for its state.
  Status open(std::int32_t slot, const SlotSamplingConfig& config, cudaStream_t stream);
  /// Forgets `slot` (its penalty row goes back to the pool); no-op when it is not open.
  void close(std::int32_t slot);
  /// Counts `tokens` as `slot`'s output (a no-op for slots without penalties). INVALID_ARGUMENT
  /// for a closed slot or a token outside the vocabulary.
  Status accept(std::int32_t slot, std::span<const std::int32_t> tokens, cudaStream_t stream);

  bool is_open(std::int32_t slot) const;
  /// `slot`'s record as the device has it; nullptr when the slot is not open.
  const SlotRecord* record(std::int32_t slot) const;
  /// The device arrays, for a launch (they move when the table grows).
  SlotArrays arrays() const;
  /// Device bytes held.
  std::int64_t device_bytes() const;

 private:
  struct Slot {
    bool open = false;
    SlotRecord record;
    std::vector<std::int32_t> ids;  // bias ids, then min_tokens banned ids
    std::vector<float> values;      // bias values, then zeros
  };

  Status reserve_records(std::int64_t num_slots, cudaStream_t stream);
  Status upload_record(std::int32_t slot, cudaStream_t stream);
  Status place_lists(std::int32_t slot, cudaStream_t stream);
  Status compact_arena(std::int64_t extra, cudaStream_t stream);
  StatusOr<std::int32_t> take_penalty_row(cudaStream_t stream);

  std::int64_t vocab_size_ = 0;
  std::vector<Slot> slots_;     // by slot index
  cuda::DeviceBuffer records_;  // [records_capacity_] SlotRecord
  std::int64_t records_capacity_ = 0;
  cuda::DeviceBuffer arena_ids_;     // [arena_capacity_]
  cuda::DeviceBuffer arena_values_;  // [arena_capacity_]
  std::int64_t arena_capacity_ = 0;
  std::int64_t arena_used_ = 0;
  cuda::DeviceBuffer counts_;  // [penalty_rows_, vocab] int32
  cuda::DeviceBuffer prompt_;  // [penalty_rows_, mask_words(vocab)] bits
  std::int32_t penalty_rows_ = 0;
  std::vector<std::int32_t> free_penalty_rows_;
  cuda::DeviceBuffer accepted_;  // [accepted_capacity_] tokens for accept()
  std::int64_t accepted_capacity_ = 0;
};

}  // namespace pagoda::kernels
