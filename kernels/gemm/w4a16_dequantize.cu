// The W4A16 matrix element by element (w4a16_gemm.h's launch_w4a16_dequantize,
// launch_w4a16_gather_rows, launch_gather_columns): the large-m path's dequantized weight, a
// quantized token table's rows, act-order's gathered x. The dequantizer's and the row gather's
// threads write 8 columns each (one group); the column gather's, one element each.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/gemm/w4a16_gemm.h"
#include "quant/w4a16_layout.h"

namespace pagoda::kernels {

namespace {

constexpr std::int64_t kTileRows = quant::kW4A16TileRows;
constexpr std::int64_t kTileCols = quant::kW4A16TileCols;

bool is_16_bit(cuda::ScalarType t) {
  return t == cuda::ScalarType::kBF16 || t == cuda::ScalarType::kF16;
}

unsigned blocks_for(std::int64_t elements, int threads) {
  return static_cast<unsigned>((elements + threads - 1) / threads);
}

// Element (row, col) of the matrix in fp32: d (q - z), or the GGUF form's (S sc) (q - code_zero)
// + B mc with the reference dequantizer's order and roundings (quant/w4a16_layout.h; no FMA
// contraction would change them, the products being exact, but say so). `group` is
// col / w.group_size, which callers share across a run of columns.
__device__ __forceinline__ float dequantize_element(const W4A16Weights& w, std::int64_t row,
                                                    std::int64_t col, std::int64_t group,
                                                    std::int64_t k_tiles,
                                                    std::int64_t padded_rows) {
  std::int64_t word = 0;
  int shift = 0;
  quant::w4a16_slot(row, col, k_tiles, &word, &shift);
  int q = static_cast<int>((w.packed[word] >> shift) & 0xF);
  const std::int64_t at = group * padded_rows + row;
  const auto* scales = reinterpret_cast<const __half*>(w.scales);
  if (w.scale_codes == nullptr) {
    return __half2float(scales[at]) * static_cast<float>(q - w.zeros[at]);
  }
  if (w.hi_bits > 0) {
    quant::w4a16_hi_slot(row, col, k_tiles, w.hi_bits, &word, &shift);
    q |= static_cast<int>((w.packed_hi[word] >> shift) & ((1u << w.hi_bits) - 1)) << 4;
  }
  const std::int64_t super_at = (group >> w.super_shift) * padded_rows + row;
  const float scale =
      __fmul_rn(__half2float(scales[super_at]), static_cast<float>(w.scale_codes[at]));
  float v = __fmul_rn(scale, static_cast<float>(q - w.code_zero));
  if (w.mins != nullptr) {
    const auto* mins = reinterpret_cast<const __half*>(w.mins);
    v = __fadd_rn(v, __fmul_rn(__half2float(mins[super_at]), static_cast<float>(w.min_codes[at])));
  }
  return v;
}

// Columns one dequantizer thread writes: 16 bytes of output, within one group (groups are
// multiples of 16 columns) and one row (row widths are multiples of 32).
constexpr int kChunk = 8;

// One thread per kChunk columns of a row. The one-element-per-thread form took ~320 us for
// 4096 x 14336 on run 29's H200, ~9x its bytes' time, bound by three 64-bit divisions by runtime
// values per element. Here one 32-bit division finds the row, one more the group.
template <typename T>
__global__ void w4a16_dequantize_kernel(const W4A16Weights w, T* __restrict__ out,
                                        std::uint32_t chunks_per_row, std::uint32_t chunks,
                                        std::int64_t k_tiles, std::int64_t padded_rows) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= chunks) return;
  const std::uint32_t row = t / chunks_per_row;
  const std::uint32_t col = (t - row * chunks_per_row) * kChunk;
  const std::int64_t group = col / static_cast<std::uint32_t>(w.group_size);
  alignas(16) T values[kChunk];
#pragma unroll
  for (int j = 0; j < kChunk; ++j) {
    values[j] = from_float<T>(dequantize_element(w, row, col + j, group, k_tiles, padded_rows));
  }
  *reinterpret_cast<uint4*>(out + static_cast<std::int64_t>(row) * w.cols + col) =
      *reinterpret_cast<const uint4*>(values);
}

// out[t] = row ids[t] as launch_w4a16_dequantize writes it (then times `scale`, in fp32 and
// rounded once, when `scaled`); ids out of range give zero rows. grid.x covers a row's
// kChunk-column chunks, grid.y the ids (a grid-stride loop past 65535 of them): a thread's chunk
// lies in one group, found once, so no element divides by a runtime value.
template <typename T>
__global__ void w4a16_gather_rows_kernel(const W4A16Weights w, const std::int32_t* __restrict__ ids,
                                         std::int64_t num_ids, bool scaled, float scale,
                                         T* __restrict__ out, std::int64_t k_tiles,
                                         std::int64_t padded_rows) {
  const std::int64_t col =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kChunk;
  if (col >= w.cols) return;
  const std::int64_t group = col / w.group_size;
  for (std::int64_t i = blockIdx.y; i < num_ids; i += gridDim.y) {
    const std::int32_t id = ids[i];
    T* row_out = out + i * w.cols + col;
    if (id < 0 || id >= w.rows) {
#pragma unroll
      for (int j = 0; j < kChunk; ++j) row_out[j] = from_float<T>(0.0f);
      continue;
    }
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const T v = from_float<T>(dequantize_element(w, id, col + j, group, k_tiles, padded_rows));
      row_out[j] = scaled ? from_float<T>(to_float(v) * scale) : v;
    }
  }
}

// grid.x covers a row's columns, grid.y the rows (a grid-stride loop past 65535 of them): no
// division by the runtime width per element.
template <typename T>
__global__ void gather_columns_kernel(const T* __restrict__ x, std::int64_t m, std::int64_t k,
                                      const std::int32_t* __restrict__ permutation,
                                      T* __restrict__ out) {
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= k) return;
  const std::int32_t from = permutation[col];
  for (std::int64_t row = blockIdx.y; row < m; row += gridDim.y)
    out[row * k + col] = x[row * k + from];
}

bool dequantizable(const W4A16Weights& w, cuda::ScalarType dtype) {
  const std::int64_t least_group = w.scale_codes == nullptr ? 32 : 16;
  return is_16_bit(dtype) && w.rows >= 1 && w.cols >= 32 && w.cols % 32 == 0 &&
         w.group_size >= least_group;
}
std::int64_t k_tiles_of(const W4A16Weights& w) {
  return (w.cols + kTileCols - 1) / kTileCols;
}
std::int64_t padded_rows_of(const W4A16Weights& w) {
  return (w.rows + kTileRows - 1) / kTileRows * kTileRows;
}
}  // namespace

Status launch_w4a16_dequantize(const W4A16Weights& w, void* out, cuda::ScalarType dtype,
                               cudaStream_t stream) {
  if (!dequantizable(w, dtype)) {
    return invalid_argument("w4a16 dequantize: unsupported shape or dtype");
  }
  const std::int64_t chunks = w.rows * (w.cols / kChunk);
  if (chunks > UINT32_MAX || w.cols > UINT32_MAX || w.group_size % kChunk != 0 ||
      reinterpret_cast<std::uintptr_t>(out) % 16 != 0) {
    return invalid_argument(
        "w4a16 dequantize: needs fewer than 2^32 8-column chunks, groups of whole chunks and a "
        "16-byte aligned output");
  }
  const auto chunks_per_row = static_cast<std::uint32_t>(w.cols / kChunk);
  const auto n = static_cast<std::uint32_t>(chunks);
  const std::int64_t k_tiles = k_tiles_of(w);
  const std::int64_t padded_rows = padded_rows_of(w);
  const unsigned blocks = blocks_for(chunks, 256);
  constexpr const char* kName = "w4a16_dequantize_kernel";
  if (dtype == cuda::ScalarType::kBF16) {
    return launch_kernel(w4a16_dequantize_kernel<__nv_bfloat16>, dim3(blocks), dim3(256), 0, stream,
                         kName, w, static_cast<__nv_bfloat16*>(out), chunks_per_row, n, k_tiles,
                         padded_rows);
  }
  return launch_kernel(w4a16_dequantize_kernel<__half>, dim3(blocks), dim3(256), 0, stream, kName,
                       w, static_cast<__half*>(out), chunks_per_row, n, k_tiles, padded_rows);
}

Status launch_w4a16_gather_rows(const W4A16Weights& w, const std::int32_t* ids,
                                std::int64_t num_ids, float scale, void* out,
                                cuda::ScalarType dtype, cudaStream_t stream) {
  if (!dequantizable(w, dtype) || num_ids < 0) {
    return invalid_argument("w4a16 gather rows: unsupported shape or dtype");
  }
  if (num_ids == 0) return Status::ok_status();
  if (ids == nullptr || out == nullptr) return invalid_argument("w4a16 gather rows: null pointer");
  if (w.group_size % kChunk != 0) {
    return invalid_argument("w4a16 gather rows: groups must be whole 8-column chunks");
  }
  const dim3 grid(blocks_for(w.cols / kChunk, 256),
                  static_cast<unsigned>(std::min<std::int64_t>(num_ids, 65535)));
  const bool scaled = scale != 1.0f;
  constexpr const char* kName = "w4a16_gather_rows_kernel";
  if (dtype == cuda::ScalarType::kBF16) {
    return launch_kernel(w4a16_gather_rows_kernel<__nv_bfloat16>, grid, dim3(256), 0, stream, kName,
                         w, ids, num_ids, scaled, scale, static_cast<__nv_bfloat16*>(out),
                         k_tiles_of(w), padded_rows_of(w));
  }
  return launch_kernel(w4a16_gather_rows_kernel<__half>, grid, dim3(256), 0, stream, kName, w, ids,
                       num_ids, scaled, scale, static_cast<__half*>(out), k_tiles_of(w),
                       padded_rows_of(w));
}

Status launch_gather_columns(const void* x, std::int64_t m, std::int64_t k,
                             const std::int32_t* permutation, void* out, cuda::ScalarType dtype,
                             cudaStream_t stream) {
  if (!is_16_bit(dtype) || m < 0 || k < 1) {
    return invalid_argument("gather columns: unsupported shape or dtype");
  }
  if (m == 0) return Status::ok_status();
  const dim3 grid(blocks_for(k, 256), static_cast<unsigned>(std::min<std::int64_t>(m, 65535)));
  constexpr const char* kName = "gather_columns_kernel";
  if (dtype == cuda::ScalarType::kBF16) {
    return launch_kernel(gather_columns_kernel<__nv_bfloat16>, grid, dim3(256), 0, stream, kName,
                         static_cast<const __nv_bfloat16*>(x), m, k, permutation,
                         static_cast<__nv_bfloat16*>(out));
  }
  return launch_kernel(gather_columns_kernel<__half>, grid, dim3(256), 0, stream, kName,
                       static_cast<const __half*>(x), m, k, permutation, static_cast<__half*>(out));
}

}  // namespace pagoda::kernels
