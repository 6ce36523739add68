// The GPU's counterpart of HostSampler (src/sampling/host_sampler.h): a step's SamplingBatch
// sampled beside the logits, chunk by chunk as the LM head produces them, so that only token
// ids, the asked-for logprobs and the raw rows of return_logits rows reach the host.
//
//   begin_step    check the rows, pack them into pinned memory, one copy
//   stage_masks   after the forward pass is launched: wait for the allowed masks, one copy
//   sample_chunk  per chunk of logits rows: process -> sample -> logprobs; returned rows start
//                 their copy to pinned memory
//   finish_step   count the tokens for penalties (device), one copy of ids + logprobs back, one
//                 stream sync, unpack into StepOutput
//   = end_step    the same without the wait: the step's copy back is in flight, and the next
//     + collect_step  step can begin while it runs (overlapped steps); collect_step waits for the
//                 oldest ended step and unpacks it. At most kMaxStepsInFlight ended steps wait.
//
// The host side of a step (its packed rows, its output) lives in one of kMaxStepsInFlight + 1
// pinned buffer sets, so packing step N+1 never touches what step N's copies still read.
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
  /// to the device; its masks follow with stage_masks().
  Status begin_step(const SamplingBatch& batch, cudaStream_t stream);
  /// Waits for `batch`'s masks (SamplingBatch::wait_for_masks: they are filled on the host while
  /// the forward pass runs, so call this after launching it) and sends them to the device,
  /// before the first sample_chunk. The same batch as begin_step's.
  Status stage_masks(const SamplingBatch& batch, cudaStream_t stream);
  /// Rows [first_row, first_row + num_rows) of the step, whose raw logits `logits` holds
  /// ([num_rows, vocab] fp32, device; read until the stream passes this call).
  Status sample_chunk(const float* logits, std::int64_t first_row, std::int64_t num_rows,
                      cudaStream_t stream);
  /// Counts the sampled tokens for their slots, copies ids and logprobs to the host, waits for
  /// `stream` and fills `out` (vectors keep their capacity).
  Status finish_step(cudaStream_t stream, StepOutput& out);
  /// finish_step's work without the wait: counts, the copy back, an event. FAILED_PRECONDITION
  /// when kMaxStepsInFlight ended steps are still uncollected.
  Status end_step(cudaStream_t stream);
  /// Waits for the oldest ended step and fills `out`; FAILED_PRECONDITION when none is waiting.
  Status collect_step(StepOutput& out);
  /// Ended steps not yet collected.
  int steps_in_flight() const { return in_flight_; }
  static constexpr int kMaxStepsInFlight = 2;

  /// [rows of the last ended step]: its sampled token ids on the device, until the next step's
  /// sample_chunk overwrites them (stream order): what an overlapped next step reads its
  /// not-yet-known input tokens from.
  const std::int32_t* last_tokens_device() const { return output_device_.as<std::int32_t>(); }
  /// Rows of the last ended step (0 before any).
  std::int64_t last_step_rows() const { return last_step_rows_; }

  /// Bytes the last step copied device-to-host: ids, logprobs and returned rows.
  std::int64_t last_step_d2h_bytes() const { return last_step_d2h_bytes_; }
  /// [max_chunk_rows, vocab]: the last chunk's processed logits, in the rows it processed.
  const float* processed_logits() const { return processed_.as<float>(); }
  /// Device bytes held (buffers and slot state).
  std::int64_t device_bytes() const;

 private:
  // One step's host side: its packed rows, where its results land, and what unpacking needs.
  struct HostStep {
    HostStep() = default;
    HostStep(HostStep&&) noexcept;
    HostStep& operator=(HostStep&&) noexcept;
    ~HostStep();
    cuda::PinnedHostBuffer input;     // rows then masks, the layout of input_device_
    cuda::PinnedHostBuffer output;    // tokens then logprobs records (layout above)
    cuda::PinnedHostBuffer returned;  // [returned rows, vocab] fp32
    cudaEvent_t done = nullptr;       // recorded by end_step after the copies back
    std::int64_t num_rows = 0;
    std::size_t masks_offset = 0;    // bytes into the input buffers
    std::size_t records_offset = 0;  // bytes into the output buffers
    std::int64_t num_logprobs_rows = 0;
    std::vector<std::int32_t> returned_row;  // [num_rows]: index among returned rows, or -1
    std::int64_t num_returned = 0;
    std::int64_t d2h_bytes = 0;
    const RowRecord* rows() const { return input.as<RowRecord>(); }
  };
  static constexpr int kHostSteps = kMaxStepsInFlight + 1;

  Status reserve_input(HostStep& step, std::size_t bytes);
  Status reserve_returned(HostStep& step, std::size_t floats);
  HostStep& current() { return steps_[current_]; }

  DeviceSamplerOptions options_;
  SamplingSlotTable slots_;
  cuda::DeviceBuffer processed_;      // [max_chunk_rows, vocab] fp32
  cuda::DeviceBuffer input_device_;   // the current step's rows then masks
  cuda::DeviceBuffer output_device_;  // the current step's tokens then logprobs records
  std::vector<HostStep> steps_;       // a ring: current_, then the ended ones before it
  int current_ = 0;                   // the step begin_step packs
  int in_flight_ = 0;                 // ended, not collected: steps_[current_ - in_flight_ ...]
  std::int64_t last_step_d2h_bytes_ = 0;
  std::int64_t last_step_rows_ = 0;
};

}  // namespace pagoda::kernels
