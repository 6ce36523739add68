// A weight matrix repacked at load into one of Pagoda's block layouts (Q4_Z, F8_S), owned in
// memory rather than mapped from the file. It is the hand-off point between checkpoint formats
// and executors: the CPU decodes the blocks in its matmul; a GPU executor can repack the same
// blocks into its own kernel layout (every block of a group repeats the group's scale and zero).
//
//   bytes:  row n = [block 0][block 1] ... [block K/32 - 1]     block = 32 consecutive stored
//                                                              columns, dtype_info(dtype) bytes
//   stored column j multiplies input channel input_permutation[j] (identity when empty)
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/dtype.h"

namespace pagoda::quant {

/// std::allocator, except that resize() leaves new elements default-initialized (bytes as the
/// page holds them) instead of zeroing them: a load-time matrix is written whole by the load
/// threads (load_threads.h), and zeroing it first would touch every page once more, on one
/// thread, before they start.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  using value_type = T;
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// Bytes filled at load; see UninitializedAllocator.
using LoadBytes = std::vector<std::uint8_t, UninitializedAllocator<std::uint8_t>>;

/// An owned [rows, cols] matrix of 32-element blocks.
struct QuantizedMatrix {
  DType dtype = DType::kQ4_Z;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  /// Input channels sharing one scale (and zero): 32..cols; cols for per-channel scales.
  std::int64_t group_size = 0;
  /// rows * (cols / 32) blocks, row-major; every byte written by whoever sizes it.
  LoadBytes bytes;
  /// [cols] or empty: GPTQ act-order stores columns sorted by group, so activations are
  /// gathered through this before the product (y = x[:, perm] · W_stored^T).
  std::vector<std::int32_t> input_permutation;

  /// Bytes of one stored row.
  std::size_t row_bytes() const {
    return static_cast<std::size_t>(cols / dtype_info(dtype).block_size) *
           static_cast<std::size_t>(dtype_info(dtype).block_bytes);
  }
};

}  // namespace pagoda::quant
