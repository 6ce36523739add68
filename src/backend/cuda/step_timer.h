// Device busy and idle time per step from CUDA events: an event before a step's first operation
// and one after its last, so the gap from one step's end event to the next one's start event is
// the time the GPU sat waiting for the host (what overlapped scheduling and CUDA graphs remove).
#pragma once

#include <cuda_runtime_api.h>

#include <array>

#include "pagoda/model_executor.h"
#include "pagoda/status.h"

namespace pagoda::cuda {

/// begin() and end() bracket one step on a stream; once the stream has passed a step's end()
/// (its synchronize), collect() adds the oldest uncollected step's times. Up to kMaxSteps steps
/// may be bracketed before their collect() (overlapped steps). Move-only; owns its events.
class StepTimer {
 public:
  static constexpr int kMaxSteps = 3;

  StepTimer() = default;
  static StatusOr<StepTimer> create();
  ~StepTimer();
  StepTimer(StepTimer&& other) noexcept;
  StepTimer& operator=(StepTimer&& other) noexcept;
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;

  Status begin(cudaStream_t stream);
  Status end(cudaStream_t stream);
  /// Reads the oldest ended step's events: call once the stream has passed its end().
  Status collect();
  /// A step failed: every uncollected step's events are dropped (their time is not counted),
  /// and so is the gap before the next step.
  void cancel();

  const DeviceTimeStats& stats() const { return stats_; }

 private:
  struct Slot {
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
  };
  void destroy();

  std::array<Slot, kMaxSteps + 1> slots_{};  // a ring; one spare keeps the previous end
  int next_ = 0;                             // the slot begin() takes
  int begun_ = 0;                            // begun, not collected (the last maybe not ended)
  bool last_ended_ = false;
  int previous_end_ = -1;  // the slot whose end event the next collected step's gap starts at
  DeviceTimeStats stats_;
};

}  // namespace pagoda::cuda
