#include "backend/cuda/cuda_graph.h"

#include "backend/cuda/cuda_status.h"

namespace pagoda::cuda {

StatusOr<CudaGraphExec> CudaGraphExec::capture(cudaStream_t stream,
                                               const std::function<Status()>& issue) {
  // Thread-local mode: another thread's unrelated CUDA calls do not invalidate the capture.
  PAGODA_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const Status issued = issue();
  cudaGraph_t graph = nullptr;
  // Capture must end whatever happened, or the stream stays in capture mode.
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!issued.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    return issued;
  }
  PAGODA_CUDA_RETURN_IF_ERROR(ended);
  CudaGraphExec out;
  const cudaError_t instantiated = cudaGraphInstantiateWithFlags(&out.exec_, graph, 0);
  cudaGraphDestroy(graph);
  PAGODA_CUDA_RETURN_IF_ERROR(instantiated);
  // Uploading now moves the graph's one-time setup out of the first replay.
  PAGODA_CUDA_RETURN_IF_ERROR(cudaGraphUpload(out.exec_, stream));
  return out;
}

CudaGraphExec::~CudaGraphExec() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
}

CudaGraphExec& CudaGraphExec::operator=(CudaGraphExec&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

Status CudaGraphExec::launch(cudaStream_t stream) const {
  if (exec_ == nullptr) return Status(StatusCode::kFailedPrecondition, "launch of an empty graph");
  PAGODA_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
  return Status::ok_status();
}

bool is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
}

}  // namespace pagoda::cuda
