// The CUDA runtime on host memory, for kernels and host code built with the CPU emulation: one
// device shaped like an H100 SXM (132 SMs, compute capability 9.0) with a bounded memory, streams
// whose work runs only when the host waits for it, events, and graphs captured from streams.
// No libcudart is linked into an emulated program.
//
// Streams are as lazy as a GPU may be: work issued to a stream the program created runs when the
// host synchronizes with it (the stream, an event recorded on it, the device, or a copy to
// pageable memory), never earlier. So a host that reads a result before waiting for it, or
// rewrites a pinned buffer a queued copy has not read yet, sees what it would on a busy GPU. The
// legacy default stream (nullptr) runs its work at once, after every blocking stream's queue,
// which is the order it would have there.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "kernels/emulation/cuda_emulation.h"

namespace {

using Work = std::function<void()>;

// Work issued to a stream, numbered in issue order.
struct Queued {
  std::uint64_t number;
  Work work;
};

}  // namespace

struct CUgraph_st {
  std::vector<Work> nodes;  // in issue order; a captured stream is one chain
};

struct CUgraphExec_st {
  std::vector<Work> nodes;
};

struct CUstream_st {
  bool blocking = true;  // synchronizes with the legacy default stream
  std::deque<Queued> queue;
  std::uint64_t issued = 0;
  std::uint64_t done = 0;         // every number up to this one has run
  CUgraph_st* capture = nullptr;  // the graph being captured
  bool capture_invalidated = false;
};

struct CUevent_st {
  bool timing = true;
  cudaStream_t stream = nullptr;  // where it was last recorded (nullptr: complete)
  std::uint64_t number = 0;       // the marker's number on that stream
  bool complete = true;
  std::chrono::steady_clock::time_point when{};
};

namespace {

// One device: every queue and every run of work is under this lock, as the CTAs of the emulation
// share function-scope __shared__ storage.
std::recursive_mutex g_device;
std::set<cudaStream_t> g_streams;

// The streams the calling thread is capturing (cudaStreamCaptureModeThreadLocal): a synchronous
// call from it would make the capture invalid on a GPU.
thread_local int t_capturing = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

// Device and pinned allocations, by start address: where a copy reads and writes, and how much
// of the device is in use.
std::map<std::uintptr_t, std::size_t> g_device_allocations;
std::map<std::uintptr_t, std::size_t> g_pinned_allocations;
std::size_t g_device_bytes_in_use = 0;
// cudaFuncSetAttribute(MaxDynamicSharedMemorySize), per kernel.
std::map<const void*, int> g_max_dynamic_shared;

constexpr std::size_t kDefaultSharedBytes = 48 << 10;
constexpr std::size_t kMaxSharedBytes = 227 << 10;

std::size_t device_memory_bytes() {
  static const std::size_t bytes = [] {
    // Small by default: tests size KV pools from free memory, and the emulation's device memory
    // is this machine's.
    const char* env = std::getenv("PAGODA_EMULATED_DEVICE_MIB");
    const long long mib = env != nullptr ? std::atoll(env) : 4096;
    return static_cast<std::size_t>(std::max(mib, 1LL)) << 20;
  }();
  return bytes;
}

bool inside(const std::map<std::uintptr_t, std::size_t>& allocations, const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  auto it = allocations.upper_bound(a);
  if (it == allocations.begin()) return false;
  --it;
  return a < it->first + it->second;
}

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

// Runs `stream`'s queue up to and including `number`.
void drain(cudaStream_t stream, std::uint64_t number) {
  while (!stream->queue.empty() && stream->queue.front().number <= number) {
    Queued item = std::move(stream->queue.front());
    stream->queue.pop_front();
    item.work();
    stream->done = item.number;
  }
}
void drain_all(cudaStream_t stream) {
  drain(stream, stream->issued);
}
void drain_blocking_streams() {
  for (cudaStream_t s : g_streams) {
    if (s->blocking) drain_all(s);
  }
}
void drain_device() {
  for (cudaStream_t s : g_streams) drain_all(s);
}

// A synchronous call the capturing thread may not make: on a GPU it invalidates the capture.
bool refused_in_capture() {
  if (t_capturing == 0) return false;
  for (cudaStream_t s : g_streams) {
    if (s->capture != nullptr) s->capture_invalidated = true;
  }
  t_last_error = cudaErrorStreamCaptureImplicit;
  return true;
}

void enqueue(cudaStream_t stream, Work work) {
  std::lock_guard lock(g_device);
  if (stream == nullptr) {
    if (refused_in_capture()) return;
    drain_blocking_streams();
    work();
    return;
  }
  if (stream->capture != nullptr) {
    stream->capture->nodes.push_back(std::move(work));
    return;
  }
  stream->queue.push_back({++stream->issued, std::move(work)});
}

cudaError_t check_stream(cudaStream_t stream) {
  if (stream == nullptr || g_streams.count(stream) != 0) return cudaSuccess;
  return fail(cudaErrorInvalidResourceHandle);
}

}  // namespace

namespace pagoda::emulation {

void submit(cudaStream_t stream, std::function<void()> work) {
  enqueue(stream, std::move(work));
}

bool launch_allowed(const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes) {
  std::lock_guard lock(g_device);
  const unsigned long long threads = 1ULL * block.x * block.y * block.z;
  bool ok = threads >= 1 && threads <= 1024 && block.z <= 64 && grid.x >= 1 && grid.y >= 1 &&
            grid.z >= 1 && grid.x <= 2147483647u && grid.y <= 65535 && grid.z <= 65535;
  if (!ok) {
    t_last_error = cudaErrorInvalidConfiguration;
    return false;
  }
  // Past 48 KB a kernel must have asked for its dynamic shared memory (cudaFuncSetAttribute).
  const auto it = g_max_dynamic_shared.find(kernel);
  const std::size_t allowed =
      it != g_max_dynamic_shared.end() ? static_cast<std::size_t>(it->second) : kDefaultSharedBytes;
  if (shared_bytes > std::max(allowed, kDefaultSharedBytes) || shared_bytes > kMaxSharedBytes) {
    t_last_error = cudaErrorInvalidValue;
    return false;
  }
  return true;
}

}  // namespace pagoda::emulation

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = 132; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = static_cast<int>(kMaxSharedBytes); break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int) {
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "CUDA emulation (H100-shaped)", sizeof(prop->name) - 1);
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;
  prop->l2CacheSize = 50 << 20;
  prop->sharedMemPerBlockOptin = kMaxSharedBytes;
  prop->totalGlobalMem = device_memory_bytes();
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::lock_guard lock(g_device);
  *total_bytes = device_memory_bytes();
  *free_bytes = *total_bytes - g_device_bytes_in_use;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void* kernel, cudaFuncAttribute attr, int value) {
  std::lock_guard lock(g_device);
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<std::size_t>(value) > kMaxSharedBytes) {
      return fail(cudaErrorInvalidValue);
    }
    g_max_dynamic_shared[kernel] = value;
  }
  return cudaSuccess;
}

// 256-byte aligned, as cudaMalloc's; past the device's memory, an allocation fails.
cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  std::lock_guard lock(g_device);
  *p = nullptr;
  if (bytes > device_memory_bytes() - g_device_bytes_in_use) {
    return fail(cudaErrorMemoryAllocation);
  }
  const std::size_t rounded = (bytes + 255) / 256 * 256;
  *p = std::aligned_alloc(256, rounded + 256);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  g_device_allocations[reinterpret_cast<std::uintptr_t>(*p)] = std::max<std::size_t>(bytes, 1);
  g_device_bytes_in_use += rounded;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard lock(g_device);
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  const auto it = g_device_allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == g_device_allocations.end()) return fail(cudaErrorInvalidValue);
  drain_device();  // cudaFree waits for the device
  g_device_bytes_in_use -= (it->second + 255) / 256 * 256;
  g_device_allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  std::lock_guard lock(g_device);
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
  if (*p == nullptr) return fail(cudaErrorMemoryAllocation);
  g_pinned_allocations[reinterpret_cast<std::uintptr_t>(*p)] = std::max<std::size_t>(bytes, 1);
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  if (p == nullptr) return cudaSuccess;
  std::lock_guard lock(g_device);
  const auto it = g_pinned_allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == g_pinned_allocations.end()) return fail(cudaErrorInvalidValue);
  drain_device();
  g_pinned_allocations.erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  std::lock_guard lock(g_device);
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  drain_blocking_streams();
  if (bytes > 0) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind,
                            cudaStream_t stream) {
  std::lock_guard lock(g_device);
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  if (bytes == 0) return cudaSuccess;
  const bool src_pageable =
      !inside(g_device_allocations, src) && !inside(g_pinned_allocations, src);
  const bool dst_pageable =
      !inside(g_device_allocations, dst) && !inside(g_pinned_allocations, dst);
  if (src_pageable) {
    // From pageable memory the call returns once the source is staged: it may be reused at once.
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  // Into pageable memory the call returns when the copy is done.
  if (dst_pageable && stream != nullptr && stream->capture == nullptr) drain_all(stream);
  return cudaSuccess;
}
cudaError_t cudaMemcpy2DAsync(void* dst, std::size_t dst_pitch, const void* src,
                              std::size_t src_pitch, std::size_t width, std::size_t height,
                              cudaMemcpyKind kind, cudaStream_t stream) {
  if (width > dst_pitch || width > src_pitch) return fail(cudaErrorInvalidPitchValue);
  for (std::size_t row = 0; row < height; ++row) {
    const cudaError_t e = cudaMemcpyAsync(static_cast<unsigned char*>(dst) + row * dst_pitch,
                                          static_cast<const unsigned char*>(src) + row * src_pitch,
                                          width, kind, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
  std::lock_guard lock(g_device);
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  drain_blocking_streams();
  if (bytes > 0) std::memset(dst, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream) {
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  if (bytes > 0) enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  std::lock_guard lock(g_device);
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  drain_device();
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  std::lock_guard lock(g_device);
  *stream = new CUstream_st;
  (*stream)->blocking = (flags & cudaStreamNonBlocking) == 0;
  g_streams.insert(*stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard lock(g_device);
  if (stream == nullptr || g_streams.count(stream) == 0)
    return fail(cudaErrorInvalidResourceHandle);
  drain_all(stream);  // work already issued still completes
  g_streams.erase(stream);
  delete stream->capture;
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  std::lock_guard lock(g_device);
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  if (stream != nullptr && stream->capture != nullptr) {
    stream->capture_invalidated = true;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  if (stream == nullptr) {
    drain_blocking_streams();
  } else {
    drain_all(stream);
  }
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned) {
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  std::lock_guard lock(g_device);
  if (event->complete || event->stream == nullptr) return cudaSuccess;
  const cudaStream_t other = event->stream;
  const std::uint64_t number = event->number;
  enqueue(stream, [other, number] { drain(other, number); });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  std::lock_guard lock(g_device);
  if (stream == nullptr || g_streams.count(stream) == 0)
    return fail(cudaErrorStreamCaptureUnsupported);
  if (stream->capture != nullptr) return fail(cudaErrorIllegalState);
  stream->capture = new CUgraph_st;
  stream->capture_invalidated = false;
  ++t_capturing;
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  std::lock_guard lock(g_device);
  *graph = nullptr;
  if (stream == nullptr || stream->capture == nullptr) return fail(cudaErrorIllegalState);
  --t_capturing;
  CUgraph_st* captured = std::exchange(stream->capture, nullptr);
  if (stream->capture_invalidated) {
    delete captured;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = captured;
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  std::lock_guard lock(g_device);
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  *status = stream == nullptr || stream->capture == nullptr ? cudaStreamCaptureStatusNone
            : stream->capture_invalidated                   ? cudaStreamCaptureStatusInvalidated
                                                            : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                          unsigned long long) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->nodes};
  return cudaSuccess;
}
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  return check_stream(stream);
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  for (const Work& node : exec->nodes) enqueue(stream, node);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  std::lock_guard lock(g_device);
  drain_device();  // a graph being run is kept until it is done
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  std::lock_guard lock(g_device);
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  // A record still queued would write to the event: let it run first.
  if (!event->complete && event->stream != nullptr) drain(event->stream, event->number);
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  std::lock_guard lock(g_device);
  if (check_stream(stream) != cudaSuccess) return cudaErrorInvalidResourceHandle;
  if (stream != nullptr && stream->capture != nullptr) {
    // A record node: the event completes at each replay.
    stream->capture->nodes.push_back([event] {
      event->when = std::chrono::steady_clock::now();
      event->complete = true;
    });
    return cudaSuccess;
  }
  event->complete = false;
  event->stream = stream;
  enqueue(stream, [event] {
    event->when = std::chrono::steady_clock::now();
    event->complete = true;
  });
  event->number = stream != nullptr ? stream->issued : 0;
  return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  std::lock_guard lock(g_device);
  if (refused_in_capture()) return cudaErrorStreamCaptureImplicit;
  if (!event->complete && event->stream != nullptr) drain(event->stream, event->number);
  return cudaSuccess;
}
// A GPU finishes its work eventually: asking is enough for the emulation to run it.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  return cudaEventSynchronize(event);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  std::lock_guard lock(g_device);
  if (!start->timing || !end->timing) return fail(cudaErrorInvalidResourceHandle);
  if (!start->complete || !end->complete) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

cudaError_t cudaGetLastError() {
  return std::exchange(t_last_error, cudaSuccess);
}
cudaError_t cudaPeekAtLastError() {
  return t_last_error;
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory (emulated device)";
    case cudaErrorInvalidConfiguration: return "invalid launch configuration";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorStreamCaptureImplicit:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    default: return "emulated CUDA error";
  }
}
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    default: return "cudaErrorEmulated";
  }
}

// The range a profiler records (gpu_bench model marks its graph replays): nothing records here.
cudaError_t cudaProfilerStart() {
  return cudaSuccess;
}
cudaError_t cudaProfilerStop() {
  return cudaSuccess;
}

}  // extern "C"
