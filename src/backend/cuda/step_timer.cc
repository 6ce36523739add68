#include "backend/cuda/step_timer.h"

#include <utility>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

namespace {
constexpr int kSlots = StepTimer::kMaxSteps + 1;
}  // namespace

StatusOr<StepTimer> StepTimer::create() {
  StepTimer timer;
  for (Slot& slot : timer.slots_) {
    PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.start));
    PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&slot.end));
  }
  return timer;
}

StepTimer::~StepTimer() {
  destroy();
}

void StepTimer::destroy() {
  for (Slot& slot : slots_) {
    if (slot.start != nullptr) cudaEventDestroy(slot.start);
    if (slot.end != nullptr) cudaEventDestroy(slot.end);
    slot = {};
  }
}

StepTimer::StepTimer(StepTimer&& other) noexcept {
  *this = std::move(other);
}

StepTimer& StepTimer::operator=(StepTimer&& other) noexcept {
  if (this != &other) {
    destroy();
    slots_ = std::exchange(other.slots_, {});
    next_ = other.next_;
    begun_ = other.begun_;
    last_ended_ = other.last_ended_;
    previous_end_ = other.previous_end_;
    stats_ = other.stats_;
  }
  return *this;
}

Status StepTimer::begin(cudaStream_t stream) {
  // Default-constructed (no events), or every slot busy: this step is not timed.
  if (slots_[0].start == nullptr || begun_ >= kMaxSteps) return Status::ok_status();
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventRecord(slots_[next_].start, stream));
  next_ = (next_ + 1) % kSlots;
  ++begun_;
  last_ended_ = false;
  return Status::ok_status();
}

Status StepTimer::end(cudaStream_t stream) {
  if (begun_ == 0 || last_ended_) return Status::ok_status();
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventRecord(slots_[(next_ + kSlots - 1) % kSlots].end, stream));
  last_ended_ = true;
  return Status::ok_status();
}

void StepTimer::cancel() {
  begun_ = 0;
  last_ended_ = false;
  previous_end_ = -1;
}

Status StepTimer::collect() {
  // The oldest begun step; it has ended unless it is the last one begun and that has not.
  if (begun_ == 0 || (begun_ == 1 && !last_ended_)) return Status::ok_status();
  const int oldest = (next_ + kSlots - begun_) % kSlots;
  --begun_;
  const Slot& slot = slots_[oldest];
  float busy_ms = 0.0f;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&busy_ms, slot.start, slot.end));
  stats_.busy_seconds += busy_ms * 1e-3;
  ++stats_.steps;
  if (previous_end_ >= 0) {
    float gap_ms = 0.0f;
    PAGODA_CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&gap_ms, slots_[previous_end_].end, slot.start));
    const double gap = gap_ms * 1e-3;
    if (gap > 0.0 && gap <= DeviceTimeStats::kDeviceIdleGapSeconds) stats_.idle_seconds += gap;
  }
  previous_end_ = oldest;
  return Status::ok_status();
}

}  // namespace pagoda::cuda
