// Host memory standing in for device memory in the emulated kernel tests: 256-byte aligned, as
// cudaMalloc's, and poisoned (all bits set: NaN in f32, f16 and bf16) until written, so that an
// element no kernel writes shows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cuda/scalar_type.h"

namespace pagoda::emulated_test {

class HostBuffer {
 public:
  explicit HostBuffer(std::size_t bytes)
      : bytes_(bytes),
        data_(static_cast<unsigned char*>(
            std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256))) {
    poison();
  }
  template <typename T>
  explicit HostBuffer(const std::vector<T>& v) : HostBuffer(v.size() * sizeof(T)) {
    if (!v.empty()) std::memcpy(data_.get(), v.data(), bytes_);
  }
  /// Floats converted to `type`.
  HostBuffer(const std::vector<float>& v, cuda::ScalarType type)
      : HostBuffer(v.size() * cuda::scalar_type_size(type)) {
    cuda::convert_from_f32(v.data(), static_cast<std::int64_t>(v.size()), type, data_.get());
  }

  void poison() { std::memset(data_.get(), 0xFF, bytes_); }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_.get());
  }
  std::vector<float> to_floats(cuda::ScalarType type) const {
    std::vector<float> out(bytes_ / cuda::scalar_type_size(type));
    cuda::convert_to_f32(data_.get(), static_cast<std::int64_t>(out.size()), type, out.data());
    return out;
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::size_t bytes_;
  std::unique_ptr<unsigned char, Free> data_;
};

}  // namespace pagoda::emulated_test
