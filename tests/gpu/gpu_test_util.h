// Shared pieces of the GPU tests: skip without a device, device arrays in any dtype filled from
// fp32 host data, NaN poisoning, and the error metrics the tolerances are stated in.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_device.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/scalar_type.h"

namespace pagoda::gpu_test {

/// True when a GPU test is compiled for the CPU emulation of the CUDA side (tests/emulated/), which
/// runs it on host memory through an emulated runtime and cuBLASLt: its shapes shrink to what
/// fibers run in seconds.
#if defined(PAGODA_CUDA_EMULATION)
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

/// `hardware` on a GPU, `emulated` on the emulation.
template <typename T>
std::vector<T> pick(std::vector<T> hardware, std::vector<T> emulated) {
  return kEmulated ? std::move(emulated) : std::move(hardware);
}

/// Every GPU test starts with this: without a device the test reports SKIPPED, never FAILED.
#define PAGODA_SKIP_WITHOUT_GPU()                                                   \
  do {                                                                              \
    if (::pagoda::cuda::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

/// Unit roundoff of a dtype (half an ulp at 1): the size of one rounding, relative.
/// The environment variable `name`, or `fallback` when it is unset or empty.
inline std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

/// The default model for the real-model GPU tests: PAGODA_SMOLLM2_GGUF, else the checkout's copy
/// (the tests skip when it is not there).
inline std::string smollm2_gguf_path() {
  return env_or("PAGODA_SMOLLM2_GGUF",
                std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

inline double unit_roundoff(cuda::ScalarType type) {
  switch (type) {
    case cuda::ScalarType::kF32: return 0x1p-24;
    case cuda::ScalarType::kF16: return 0x1p-11;
    case cuda::ScalarType::kBF16: return 0x1p-8;
  }
  return 1.0;
}

/// Uniform values in [low, high): never zeros-only inputs, fresh per call.
inline std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float low = -1.0f,
                                        float high = 1.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// The values a dtype can hold: `v` rounded to `type` and widened back, so the CPU reference
/// sees exactly the inputs the kernel sees.
inline std::vector<float> round_to(const std::vector<float>& v, cuda::ScalarType type) {
  std::vector<std::uint8_t> bytes(v.size() * cuda::scalar_type_size(type));
  cuda::convert_from_f32(v.data(), static_cast<std::int64_t>(v.size()), type, bytes.data());
  std::vector<float> out(v.size());
  cuda::convert_to_f32(bytes.data(), static_cast<std::int64_t>(v.size()), type, out.data());
  return out;
}

/// A device array of `type`; fails the test on any CUDA error.
class DeviceArray {
 public:
  DeviceArray(std::size_t n, cuda::ScalarType type) : n_(n), type_(type) {
    auto buffer =
        cuda::DeviceBuffer::allocate(std::max<std::size_t>(n, 1) * cuda::scalar_type_size(type));
    EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
    if (buffer.ok()) buffer_ = std::move(*buffer);
  }
  DeviceArray(const std::vector<float>& host, cuda::ScalarType type)
      : DeviceArray(host.size(), type) {
    upload(host);
  }

  void upload(const std::vector<float>& host) {
    std::vector<std::uint8_t> bytes(host.size() * cuda::scalar_type_size(type_));
    cuda::convert_from_f32(host.data(), static_cast<std::int64_t>(host.size()), type_,
                           bytes.data());
    EXPECT_EQ(cudaMemcpy(buffer_.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  /// All bits set: NaN in f32, f16 and bf16, so an element the kernel forgets shows up.
  void poison() {
    EXPECT_EQ(cudaMemset(buffer_.data(), 0xff, n_ * cuda::scalar_type_size(type_)), cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<std::uint8_t> bytes(n_ * cuda::scalar_type_size(type_));
    EXPECT_EQ(cudaMemcpy(bytes.data(), buffer_.data(), bytes.size(), cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::vector<float> out(n_);
    cuda::convert_to_f32(bytes.data(), static_cast<std::int64_t>(n_), type_, out.data());
    return out;
  }
  void* data() const { return buffer_.data(); }
  std::size_t size() const { return n_; }

 private:
  std::size_t n_;
  cuda::ScalarType type_;
  cuda::DeviceBuffer buffer_;
};

/// A device copy of plain host data (indices, parameters).
template <typename T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : n_(host.size()) {
    auto buffer = cuda::DeviceBuffer::allocate(std::max<std::size_t>(n_, 1) * sizeof(T));
    EXPECT_TRUE(buffer.ok()) << buffer.status().to_string();
    if (!buffer.ok()) return;
    buffer_ = std::move(*buffer);
    EXPECT_EQ(cudaMemcpy(buffer_.data(), host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  explicit DeviceVector(std::size_t n) : DeviceVector(std::vector<T>(n)) {}
  std::vector<T> download() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), buffer_.data(), n_ * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  T* data() const { return buffer_.as<T>(); }

 private:
  std::size_t n_;
  cuda::DeviceBuffer buffer_;
};

/// ||got - want|| / ||want|| and the worst element, NaN-aware (a NaN anywhere fails).
struct Comparison {
  double relative_l2 = 0.0;
  double max_abs = 0.0;
  std::size_t max_abs_index = 0;
  std::size_t num_nan = 0;
};

inline Comparison compare(const std::vector<float>& got, const std::vector<float>& want) {
  Comparison c;
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isinf(got[i])) {
      ++c.num_nan;
      continue;
    }
    const double d = static_cast<double>(got[i]) - want[i];
    diff_sq += d * d;
    ref_sq += static_cast<double>(want[i]) * want[i];
    if (std::abs(d) > c.max_abs) {
      c.max_abs = std::abs(d);
      c.max_abs_index = i;
    }
  }
  c.relative_l2 = ref_sq > 0.0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return c;
}

/// Passes when no element is NaN/inf and the relative L2 error is within `tolerance`.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                         double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const Comparison c = compare(got, want);
  EXPECT_EQ(c.num_nan, 0u) << what << ": elements not written or not finite";
  EXPECT_LE(c.relative_l2, tolerance)
      << what << ": max |diff| " << c.max_abs << " at " << c.max_abs_index << " (got "
      << got[c.max_abs_index] << ", want " << want[c.max_abs_index] << ")";
}

inline const char* name_of(cuda::ScalarType type) {
  return cuda::scalar_type_name(type).data();
}

inline constexpr cuda::ScalarType kAllTypes[] = {cuda::ScalarType::kF32, cuda::ScalarType::kF16,
                                                 cuda::ScalarType::kBF16};

}  // namespace pagoda::gpu_test
