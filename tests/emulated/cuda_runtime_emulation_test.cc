// The emulated CUDA runtime (kernels/emulation/cuda_runtime_emulation.cc): streams that run their
// work only when the host waits for it, events that wait for exactly their part of a stream, copies
// that read pinned memory when they run and pageable memory when issued, graphs that replay what
// was captured, and the launch and capture errors a GPU gives. The CUDA executor's tests rely on
// each of these to show on the CPU what its host code would do wrong on a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "tests/emulated/cuda_runtime_emulation_kernels.h"

namespace pagoda::emulated_test {
namespace {

constexpr int kN = 300;

float* device_floats(cuda::DeviceBuffer& buffer) {
  EXPECT_EQ(cudaMemset(buffer.data(), 0, kN * sizeof(float)), cudaSuccess);
  return static_cast<float*>(buffer.data());
}

TEST(CudaRuntimeEmulation, StreamWorkRunsWhenTheHostWaitsForIt) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  auto stream = cuda::CudaStream::create().value();
  float* x = device_floats(buffer);
  ASSERT_TRUE(add_one(x, kN, stream.get()).ok());
  // Device memory is host memory here: a read before the wait sees the work undone.
  EXPECT_EQ(x[kN - 1], 0.0f);
  ASSERT_TRUE(stream.synchronize().ok());
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[kN - 1], 1.0f);
}

TEST(CudaRuntimeEmulation, AnEventWaitsForTheWorkBeforeItsRecordOnly) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  auto stream = cuda::CudaStream::create().value();
  float* x = device_floats(buffer);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);
  ASSERT_TRUE(add_one(x, kN, stream.get()).ok());
  ASSERT_EQ(cudaEventRecord(event, stream.get()), cudaSuccess);
  ASSERT_TRUE(add_one(x, kN, stream.get()).ok());
  ASSERT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_EQ(x[7], 1.0f);
  ASSERT_TRUE(stream.synchronize().ok());
  EXPECT_EQ(x[7], 2.0f);
  ASSERT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST(CudaRuntimeEmulation, AStreamWaitsForAnEventOfAnother) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  auto first = cuda::CudaStream::create().value();
  auto second = cuda::CudaStream::create().value();
  float* x = device_floats(buffer);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), cudaSuccess);
  ASSERT_TRUE(add_one(x, kN, first.get()).ok());
  ASSERT_EQ(cudaEventRecord(event, first.get()), cudaSuccess);
  ASSERT_TRUE(add_one(x, kN, first.get()).ok());
  ASSERT_EQ(cudaStreamWaitEvent(second.get(), event, 0), cudaSuccess);
  std::vector<float> seen(kN, -1.0f);
  ASSERT_EQ(
      cudaMemcpyAsync(seen.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost, second.get()),
      cudaSuccess);
  // The copy to pageable memory returned done, after the first add and before the second.
  EXPECT_EQ(seen[5], 1.0f);
  float elapsed = 0.0f;
  EXPECT_EQ(cudaEventElapsedTime(&elapsed, event, event), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
  ASSERT_TRUE(first.synchronize().ok());
  EXPECT_EQ(x[5], 2.0f);
  ASSERT_EQ(cudaEventDestroy(event), cudaSuccess);
}

TEST(CudaRuntimeEmulation, CopiesReadPinnedMemoryWhenTheyRunAndPageableWhenIssued) {
  auto buffer = cuda::DeviceBuffer::allocate(2 * sizeof(float)).value();
  auto stream = cuda::CudaStream::create().value();
  auto* device = static_cast<float*>(buffer.data());
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(float)), cudaSuccess);
  float pageable = 3.0f;
  *pinned = 3.0f;
  ASSERT_EQ(cudaMemcpyAsync(device, pinned, sizeof(float), cudaMemcpyHostToDevice, stream.get()),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpyAsync(device + 1, &pageable, sizeof(float), cudaMemcpyHostToDevice, stream.get()),
      cudaSuccess);
  // A host that refills its buffers before the copies ran:
  *pinned = 4.0f;
  pageable = 4.0f;
  ASSERT_TRUE(stream.synchronize().ok());
  EXPECT_EQ(device[0], 4.0f);  // the pinned copy read the new value, as a GPU may
  EXPECT_EQ(device[1], 3.0f);  // the pageable one was staged at the call
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST(CudaRuntimeEmulation, AGraphReplaysWhatWasCaptured) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  auto stream = cuda::CudaStream::create().value();
  float* x = device_floats(buffer);
  auto graph = cuda::CudaGraphExec::capture(stream.get(), [&] {
    EXPECT_TRUE(cuda::is_capturing(stream.get()));
    return add_one(x, kN, stream.get());
  });
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  EXPECT_FALSE(cuda::is_capturing(stream.get()));
  ASSERT_TRUE(stream.synchronize().ok());
  EXPECT_EQ(x[3], 0.0f);  // capture runs nothing
  ASSERT_TRUE(graph->launch(stream.get()).ok());
  ASSERT_TRUE(graph->launch(stream.get()).ok());
  EXPECT_EQ(x[3], 0.0f);
  ASSERT_TRUE(stream.synchronize().ok());
  EXPECT_EQ(x[3], 2.0f);
}

TEST(CudaRuntimeEmulation, ASynchronousCallInsideACaptureInvalidatesIt) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  auto stream = cuda::CudaStream::create().value();
  float* x = device_floats(buffer);
  std::vector<float> host(kN);
  auto graph = cuda::CudaGraphExec::capture(stream.get(), [&]() -> Status {
    PAGODA_RETURN_IF_ERROR(add_one(x, kN, stream.get()));
    EXPECT_NE(cudaMemcpy(host.data(), x, kN * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return Status::ok_status();
  });
  EXPECT_FALSE(graph.ok());
  (void)cudaGetLastError();
  // A launch on the legacy stream from the capturing thread is refused too.
  auto second = cuda::CudaGraphExec::capture(stream.get(), [&] { return add_one(x, kN, nullptr); });
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(x[0], 0.0f);
}

TEST(CudaRuntimeEmulation, LaunchesOutsideTheDevicesLimitsFail) {
  auto buffer = cuda::DeviceBuffer::allocate(kN * sizeof(float)).value();
  float* x = device_floats(buffer);
  EXPECT_FALSE(add_one_with_block(x, kN, 1025, nullptr).ok());
  EXPECT_TRUE(add_one_with_block(x, kN, 1024, nullptr).ok());
  EXPECT_EQ(x[kN - 1], 1.0f);
  auto sum = cuda::DeviceBuffer::allocate(sizeof(float)).value();
  auto* out = static_cast<float*>(sum.data());
  EXPECT_TRUE(sum_shared(48 << 10, out, nullptr).ok());
  EXPECT_EQ(*out, 12288.0f);
  // Past 48 KB only with the kernel's attribute raised, and never past 227 KB.
  EXPECT_FALSE(sum_shared(64 << 10, out, nullptr).ok());
  ASSERT_EQ(allow_shared(64 << 10), cudaSuccess);
  EXPECT_TRUE(sum_shared(64 << 10, out, nullptr).ok());
  EXPECT_EQ(*out, 16384.0f);
  EXPECT_FALSE(sum_shared(65 << 10, out, nullptr).ok());
  EXPECT_EQ(allow_shared(228 << 10), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CudaRuntimeEmulation, DeviceMemoryIsBoundedAndAccounted) {
  std::size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, total + 1), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  (void)cudaGetLastError();
  ASSERT_EQ(cudaMalloc(&p, 1000), cudaSuccess);
  std::size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, 1024u);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(reinterpret_cast<char*>(p) + 1), cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

}  // namespace
}  // namespace pagoda::emulated_test
