#include "backend/cuda/step_timer.h"

#include <utility>

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

StatusOr<StepTimer> StepTimer::create() {
  StepTimer timer;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer.start_));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer.end_));
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventCreate(&timer.previous_end_));
  return timer;
}

StepTimer::~StepTimer() { destroy(); }

void StepTimer::destroy() {
  for (cudaEvent_t* e : {&start_, &end_, &previous_end_}) {
    if (*e != nullptr) cudaEventDestroy(*e);
    *e = nullptr;
  }
}

StepTimer::StepTimer(StepTimer&& other) noexcept { *this = std::move(other); }

StepTimer& StepTimer::operator=(StepTimer&& other) noexcept {
  if (this != &other) {
    destroy();
    start_ = std::exchange(other.start_, nullptr);
    end_ = std::exchange(other.end_, nullptr);
    previous_end_ = std::exchange(other.previous_end_, nullptr);
    open_ = other.open_;
    ended_ = other.ended_;
    has_previous_end_ = other.has_previous_end_;
    stats_ = other.stats_;
  }
  return *this;
}

Status StepTimer::begin(cudaStream_t stream) {
  if (start_ == nullptr) return Status::ok_status();  // default-constructed: not timing
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventRecord(start_, stream));
  open_ = true;
  ended_ = false;
  return Status::ok_status();
}

Status StepTimer::end(cudaStream_t stream) {
  if (!open_) return Status::ok_status();
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventRecord(end_, stream));
  ended_ = true;
  return Status::ok_status();
}

Status StepTimer::collect() {
  if (!open_ || !ended_) return Status::ok_status();
  open_ = false;
  float busy_ms = 0.0f;
  PAGODA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&busy_ms, start_, end_));
  stats_.busy_seconds += busy_ms * 1e-3;
  ++stats_.steps;
  if (has_previous_end_) {
    float gap_ms = 0.0f;
    PAGODA_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&gap_ms, previous_end_, start_));
    const double gap = gap_ms * 1e-3;
    if (gap > 0.0 && gap <= DeviceTimeStats::kDeviceIdleGapSeconds) stats_.idle_seconds += gap;
  }
  std::swap(end_, previous_end_);
  has_previous_end_ = true;
  return Status::ok_status();
}

}  // namespace pagoda::cuda
