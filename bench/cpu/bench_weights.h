// Weight matrices for the CPU benchmarks: random quant bytes with small finite fp16 scales,
// several copies so a sweep over them streams from DRAM as a real decode step does (a 94 MB
// model does not fit in cache; one 0.5 MB matrix would).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/interleaved_rows.h"
#include "backend/cpu/tensor_view.h"

namespace pagoda::cpu::bench {

/// Copies of one [n, k] weight matrix of `dtype`, together at least `min_total_bytes`.
class WeightSet {
 public:
  WeightSet(DType dtype, std::int64_t n, std::int64_t k, std::size_t min_total_bytes) {
    const TensorView shape = dense_view(nullptr, dtype, n, k);
    bytes_per_copy_ = shape.row_stride * static_cast<std::size_t>(n);
    const std::size_t copies =
        std::max<std::size_t>(1, (min_total_bytes + bytes_per_copy_ - 1) / bytes_per_copy_);
    storage_.resize(copies * bytes_per_copy_);
    std::mt19937_64 rng(7);
    for (std::uint8_t& b : storage_) b = static_cast<std::uint8_t>(rng());
    const DTypeInfo& info = dtype_info(dtype);
    // 0x2000 is fp16 2^-7: every scale and minimum field becomes a small normal number.
    const std::uint16_t scale = 0x2000;
    for (std::size_t at = 0; at + static_cast<std::size_t>(info.block_bytes) <= storage_.size();
         at += static_cast<std::size_t>(info.block_bytes)) {
      switch (dtype) {
        case DType::kQ8_0:
        case DType::kQ4_0:
        case DType::kQ5_0: std::memcpy(&storage_[at], &scale, 2); break;
        case DType::kQ3_K: std::memcpy(&storage_[at + 108], &scale, 2); break;
        case DType::kQ2_K:
          std::memcpy(&storage_[at + 80], &scale, 2);
          std::memcpy(&storage_[at + 82], &scale, 2);
          break;
        case DType::kQ4_1:
        case DType::kQ5_1:
        case DType::kQ4_K:
        case DType::kQ5_K:
          std::memcpy(&storage_[at], &scale, 2);
          std::memcpy(&storage_[at + 2], &scale, 2);
          break;
        case DType::kQ6_K: std::memcpy(&storage_[at + 208], &scale, 2); break;
        case DType::kF16:
        case DType::kBF16: std::memcpy(&storage_[at], &scale, 2); break;
        case DType::kF32: {
          const float x = static_cast<float>(rng() % 1000) * 1e-3f - 0.5f;
          std::memcpy(&storage_[at], &x, 4);
          break;
        }
        default: break;
      }
    }
    for (std::size_t c = 0; c < copies; ++c) {
      views_.push_back(dense_view(storage_.data() + c * bytes_per_copy_, dtype, n, k));
    }
  }

  /// Every copy repacked into 16-row panels (interleaved_rows.h), as a model's weights are at load
  /// on AVX-512 VNNI CPUs; the row-major copies are freed.
  void interleave() {
    for (TensorView& view : views_) {
      interleaved_.push_back(interleave_rows(view));
      view = interleaved_.back().view;
    }
    storage_ = {};
  }

  /// The i-th copy, cycling.
  const TensorView& next() { return views_[next_++ % views_.size()]; }
  /// Bytes of one copy.
  std::size_t bytes_per_copy() const { return bytes_per_copy_; }

 private:
  std::vector<std::uint8_t> storage_;
  std::vector<TensorView> views_;
  std::vector<InterleavedMatrix> interleaved_;
  std::size_t bytes_per_copy_ = 0;
  std::size_t next_ = 0;
};

}  // namespace pagoda::cpu::bench
