// A CUDA graph captured from the work a function issues on a stream, instantiated once and
// launched many times: the decode step's few hundred kernel launches become one (vLLM's and
// SGLang's CUDA graphs). Replay re-runs the same kernels with the same arguments, so everything
// that changes between steps must live in device memory the kernels read (the step metadata).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <utility>

#include "pagoda/status.h"

namespace pagoda::cuda {

/// An instantiated graph (cudaGraphExec_t), destroyed with the object; move-only.
class CudaGraphExec {
 public:
  CudaGraphExec() = default;
  /// Captures what `issue` enqueues on `stream` (which must be idle and not capturing). Nothing
  /// runs during capture; `issue` must not synchronize or allocate. A failure from `issue` or
  /// from the capture leaves the stream usable and no graph.
  static StatusOr<CudaGraphExec> capture(cudaStream_t stream, const std::function<Status()>& issue);
  ~CudaGraphExec();
  CudaGraphExec(CudaGraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  CudaGraphExec& operator=(CudaGraphExec&& other) noexcept;
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  /// Enqueues one replay on `stream`.
  Status launch(cudaStream_t stream) const;
  bool valid() const { return exec_ != nullptr; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

/// Whether `stream` is being captured: launchers drop launch attributes a graph may not hold.
bool is_capturing(cudaStream_t stream);

}  // namespace pagoda::cuda
