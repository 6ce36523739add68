// The GPU's counterpart of HostSampler (src/sampling/host_sampler.h): a step's SamplingBatch
// sampled beside the logits, chunk by chunk as the LM head produces them, so that only token
// ids, the asked-for logprobs and the raw rows of return_logits rows reach the host.
//
//   begin_step    check the rows, pack them (and the allowed masks) into pinned memory, one copy
//   sample_chunk  per chunk of logits rows: process -> sample -> logprobs; returned rows start
//                 their copy to pinned memory
//   finish_step   count the tokens for penalties (device), one copy of ids + logprobs back, one
//                 stream sync, unpack into StepOutput
//
// Device output of a step with R rows, L of them asking for logprobs (one copy back):
//
//   [ tokens: R int32, padded to 16 B | L LogprobsRecord ]
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "kernels/sampling/sampling_layout.h"
#include "kernels/sampling/sampling_slots.h"
#include "pagoda/status.h"
#include "pagoda/step_sampling.h"

namespace pagoda::kernels {

struct DeviceSamplerOptions {
  std::int64_t vocab_size = 0;
  std::int64_t max_rows = 0;        ///< logits rows one step may carry
  std::int64_t max_chunk_rows = 0;  ///< rows one sample_chunk() may carry
};

/// Samples on the device; every call issues its work on the given stream. Not thread-safe.
class DeviceSampler {
 public:
  DeviceSampler() = default;
  static StatusOr<DeviceSampler> create(const DeviceSamplerOptions& options);

  /// As HostSampler::open_slot; RESOURCE_EXHAUSTED when the device has no room for its state.
  Status open_slot(std::int32_t slot, const SlotSamplingConfig& config, cudaStream_t stream) {
    return slots_.open(slot, config, stream);
  }
  void close_slot(std::int32_t slot) { slots_.close(slot); }
  /// Counts `tokens` for `slot`'s penalties on the device.
  Status accept_tokens(std::int32_t slot, std::span<const std::int32_t> tokens,
                       cudaStream_t stream) {
    return slots_.accept(slot, tokens, stream);
  }
  bool is_open(std::int32_t slot) const { return slots_.is_open(slot); }

  /// Checks `batch` (INVALID_ARGUMENT for a closed slot, a bad mask index, a forced token outside
  /// the vocabulary, num_logprobs past kMaxLogprobs, more rows than max_rows) and sends its rows
  /// and masks to the device in one copy.
  Status begin_step(const SamplingBatch& batch, cudaStream_t stream);
  /// Rows [first_row, first_row + num_rows) of the step, whose raw logits `logits` holds
  /// ([num_rows, vocab] fp32, device; read until the stream passes this call).
  Status sample_chunk(const float* logits, std::int64_t first_row, std::int64_t num_rows,
                      cudaStream_t stream);
  /// Counts the sampled tokens for their slots, copies ids and logprobs to the host, waits for
  /// `stream` and fills `out` (vectors keep their capacity).
  Status finish_step(cudaStream_t stream, StepOutput& out);

  /// Bytes the last step copied device-to-host: ids, logprobs and returned rows.
  std::int64_t last_step_d2h_bytes() const { return last_step_d2h_bytes_; }
  /// [max_chunk_rows, vocab]: the last chunk's processed logits, in the rows it processed.
  const float* processed_logits() const { return processed_.as<float>(); }
  /// Device bytes held (buffers and slot state).
  std::int64_t device_bytes() const;

 private:
  Status reserve_input(std::size_t bytes);
  Status reserve_returned(std::size_t floats);
  const RowRecord* host_rows() const { return input_host_.as<RowRecord>(); }

  DeviceSamplerOptions options_;
  SamplingSlotTable slots_;
  cuda::DeviceBuffer processed_;  // [max_chunk_rows, vocab] fp32
  // Rows then masks, the same layout in both.
  cuda::PinnedHostBuffer input_host_;
  cuda::DeviceBuffer input_device_;
  // Tokens then logprobs records (layout above), the same in both.
  cuda::PinnedHostBuffer output_host_;
  cuda::DeviceBuffer output_device_;
  cuda::PinnedHostBuffer returned_host_;  // [returned rows, vocab] fp32

  // The current step.
  std::int64_t num_rows_ = 0;
  std::size_t masks_offset_ = 0;    // bytes into the input buffers
  std::size_t records_offset_ = 0;  // bytes into the output buffers
  std::int64_t num_logprobs_rows_ = 0;
  std::vector<std::int32_t> returned_row_;  // [num_rows]: index among returned rows, or -1
  std::int64_t num_returned_ = 0;
  std::int64_t last_step_d2h_bytes_ = 0;
};

}  // namespace pagoda::kernels
