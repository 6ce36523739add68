// Device busy and idle time per step from CUDA events: an event before a step's first operation
// and one after its last, so the gap from one step's end event to the next one's start event is
// the time the GPU sat waiting for the host (what overlapped scheduling and CUDA graphs remove).
#pragma once

#include <cuda_runtime_api.h>

#include "pagoda/model_executor.h"
#include "pagoda/status.h"

namespace pagoda::cuda {

/// begin() and end() bracket one step on a stream; after the stream has passed end() (the step's
/// synchronize), collect() adds its times. Move-only; owns its events.
class StepTimer {
 public:
  StepTimer() = default;
  static StatusOr<StepTimer> create();
  ~StepTimer();
  StepTimer(StepTimer&& other) noexcept;
  StepTimer& operator=(StepTimer&& other) noexcept;
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  Status begin(cudaStream_t stream);
  Status end(cudaStream_t stream);
  /// Reads the finished step's events: call once the stream is synchronized past end().
  Status collect();
  /// A failed step: its events are dropped, and the next step's gap is not counted.
  void cancel() { open_ = false; has_previous_end_ = false; }

  const DeviceTimeStats& stats() const { return stats_; }

 private:
  void destroy();

  cudaEvent_t start_ = nullptr;
  cudaEvent_t end_ = nullptr;
  cudaEvent_t previous_end_ = nullptr;
  bool open_ = false;
  bool ended_ = false;
  bool has_previous_end_ = false;
  DeviceTimeStats stats_;
};

}  // namespace pagoda::cuda
