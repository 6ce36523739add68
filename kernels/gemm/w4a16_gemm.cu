#include <algorithm>
#include <array>
#include <atomic>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/gemm/w4a16_gemm.h"
#include "quant/w4a16_layout.h"

namespace pagoda::kernels {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = static_cast<int>(quant::kW4A16TileRows);
constexpr int kTileCols = static_cast<int>(quant::kW4A16TileCols);
constexpr int kTileVectors = 32;     // 16-byte vectors per tile: one per lane
constexpr int kAhead = 4;            // tiles each lane has in flight
constexpr int kMinTilesPerWarp = 2;  // below this a K split costs more than it hides
constexpr int kCtasPerSm = 4;        // 16 warps per SM streaming weights

// Codes {q_lo, q_hi} OR'ed into a 16-bit float pair whose exponent makes the mantissa's low bits
// the integer: bf16 128 + q (mantissa step 1 at 128..255), f16 1024 + q. Subtracting
// {base + z, base + z} leaves q - z exactly.
template <typename T>
struct Nibbles;
template <>
struct Nibbles<__nv_bfloat16> {
  static constexpr std::uint32_t kMagic = 0x43004300u;
  static constexpr std::uint32_t kBase = 0x4300u;
  __device__ static __forceinline__ std::uint32_t sub(std::uint32_t a, std::uint32_t b) {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                     *reinterpret_cast<const __nv_bfloat162*>(&b));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
};
template <>
struct Nibbles<__half> {
  static constexpr std::uint32_t kMagic = 0x64006400u;
  static constexpr std::uint32_t kBase = 0x6400u;
  __device__ static __forceinline__ std::uint32_t sub(std::uint32_t a, std::uint32_t b) {
    const __half2 r =
        __hsub2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
    return *reinterpret_cast<const std::uint32_t*>(&r);
  }
};

// Two consecutive elements of x (row r, columns c and c + 1) as one A-fragment register; rows
// past m and columns past k (the last tile's padding) read as zeros.
template <typename T>
__device__ __forceinline__ std::uint32_t x_pair(const T* __restrict__ x, int r, int c, int m,
                                                int k) {
  if (r >= m || c >= k) return 0;
  return __ldg(reinterpret_cast<const unsigned int*>(x + static_cast<std::size_t>(r) * k + c));
}

// CTA = (16-row weight tile nt, K split, block of 16 * kMTiles rows of x). Each warp walks its
// share of the CTA's 64-column tiles; per 16-column step and group it accumulates x (q - z) in
// `part`, and on a group change adds scale * part to `acc`.
template <typename T, int kMTiles>
__global__ void __launch_bounds__(kThreads)
    w4a16_gemm_kernel(const T* __restrict__ x, const uint4* __restrict__ packed,
                      const __half* __restrict__ scales, const std::uint8_t* __restrict__ zeros,
                      const T* __restrict__ bias, T* __restrict__ y, float* __restrict__ partial,
                      int m, int n, int k, int k_tiles, int padded_rows, int group_size, int groups,
                      int tiles_per_split) {
  using Q = Nibbles<T>;
  __shared__ float reduce[kWarps][kMTiles * 16][17];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const int nt = static_cast<int>(blockIdx.x), split = static_cast<int>(blockIdx.y);
  const int row0 = static_cast<int>(blockIdx.z) * kMTiles * 16;

  const int cta_begin = split * tiles_per_split;
  const int cta_tiles = max(0, min(k_tiles, cta_begin + tiles_per_split) - cta_begin);
  const int per_warp = (cta_tiles + kWarps - 1) / kWarps;
  const int begin = cta_begin + min(cta_tiles, warp * per_warp);
  const int count = cta_begin + min(cta_tiles, (warp + 1) * per_warp) - begin;

  float acc[kMTiles][2][4];
  float part[kMTiles][2][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][j][e] = part[mt][j][e] = 0.0f;
    }
  }
  const int col_b = nt * kTileRows + g;      // the B fragment's weight row, n-tile 0
  const int col_c = nt * kTileRows + 2 * t;  // the C fragment's first output column, n-tile 0
  int group = -1;
  std::uint32_t zero_pair[2] = {0, 0};

  auto flush = [&]() {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float2 s = __half22float2(*reinterpret_cast<const __half2*>(
          scales + static_cast<std::size_t>(group) * padded_rows + col_c + 8 * j));
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        acc[mt][j][0] += s.x * part[mt][j][0];
        acc[mt][j][1] += s.y * part[mt][j][1];
        acc[mt][j][2] += s.x * part[mt][j][2];
        acc[mt][j][3] += s.y * part[mt][j][3];
#pragma unroll
        for (int e = 0; e < 4; ++e) part[mt][j][e] = 0.0f;
      }
    }
  };

  auto step = [&](std::uint32_t word, int k0) {
    const int grp = min(k0 / group_size, groups - 1);
    if (grp != group) {
      if (group >= 0) flush();
      group = grp;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const std::uint32_t z =
            Q::kBase + zeros[static_cast<std::size_t>(grp) * padded_rows + col_b + 8 * j];
        zero_pair[j] = z | (z << 16);
      }
    }
    std::uint32_t b[2][2];
#pragma unroll
    for (int pair = 0; pair < 4; ++pair) {
      b[pair >> 1][pair & 1] =
          Q::sub(((word >> (4 * pair)) & 0x000F000Fu) | Q::kMagic, zero_pair[pair >> 1]);
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const int r0 = row0 + mt * 16 + g, c0 = k0 + 2 * t;
      const std::uint32_t a[4] = {x_pair(x, r0, c0, m, k), x_pair(x, r0 + 8, c0, m, k),
                                  x_pair(x, r0, c0 + 8, m, k), x_pair(x, r0 + 8, c0 + 8, m, k)};
      mma_16816<T>(part[mt][0], a, b[0][0], b[0][1]);
      mma_16816<T>(part[mt][1], a, b[1][0], b[1][1]);
    }
  };

  // Weights are read once: streaming (evict-first) loads, kAhead tiles ahead of the math.
  const uint4* tiles = packed + static_cast<std::size_t>(nt) * k_tiles * kTileVectors + lane;
  uint4 ahead[kAhead];
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    if (u < count) ahead[u] = __ldcs(tiles + static_cast<std::size_t>(begin + u) * kTileVectors);
  }
  for (int base = 0; base < count; base += kAhead) {
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int i = base + u;
      if (i < count) {
        const uint4 words = ahead[u];
        if (i + kAhead < count) {
          ahead[u] = __ldcs(tiles + static_cast<std::size_t>(begin + i + kAhead) * kTileVectors);
        }
        const int k0 = (begin + i) * kTileCols;
        step(words.x, k0);
        step(words.y, k0 + 16);
        step(words.z, k0 + 32);
        step(words.w, k0 + 48);
      }
    }
  }
  if (group >= 0) flush();

    // The 4 warps' sums, added in warp order (the same bits every run).
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        reduce[warp][mt * 16 + g + 8 * (e >> 1)][8 * j + 2 * t + (e & 1)] = acc[mt][j][e];
      }
    }
  }
  __syncthreads();
  for (int idx = static_cast<int>(threadIdx.x); idx < kMTiles * 16 * 16; idx += kThreads) {
    const int r = idx >> 4, c = idx & 15;
    const int row = row0 + r, col = nt * kTileRows + c;
    if (row >= m || col >= n) continue;
    float sum = reduce[0][r][c];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) sum += reduce[w][r][c];
    const std::size_t at = static_cast<std::size_t>(row) * n + col;
    if (partial != nullptr) {
      partial[static_cast<std::size_t>(split) * m * n + at] = sum;
    } else {
      if (bias != nullptr) sum += to_float(bias[col]);
      y[at] = from_float<T>(sum);
    }
  }
}

// y = the K splits' partial sums added in split order, + bias, rounded once.
template <typename T>
__global__ void w4a16_reduce_kernel(const float* __restrict__ partial, int splits,
                                    const T* __restrict__ bias, T* __restrict__ y, int m, int n) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t outputs = static_cast<std::size_t>(m) * n;
  if (i >= outputs) return;
  float sum = partial[i];
  for (int s = 1; s < splits; ++s) sum += partial[static_cast<std::size_t>(s) * outputs + i];
  if (bias != nullptr) sum += to_float(bias[i % n]);
  y[i] = from_float<T>(sum);
}

template <typename T>
__global__ void w4a16_dequantize_kernel(const std::uint32_t* __restrict__ packed,
                                        const __half* __restrict__ scales,
                                        const std::uint8_t* __restrict__ zeros, T* __restrict__ out,
                                        std::int64_t rows, std::int64_t cols, std::int64_t k_tiles,
                                        std::int64_t padded_rows, std::int64_t group_size) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const std::int64_t row = i / cols, col = i % cols;
  std::int64_t word = 0;
  int shift = 0;
  quant::w4a16_slot(row, col, k_tiles, &word, &shift);
  const int q = static_cast<int>((packed[word] >> shift) & 0xF);
  const std::int64_t at = (col / group_size) * padded_rows + row;
  out[i] = from_float<T>(__half2float(scales[at]) * static_cast<float>(q - zeros[at]));
}

template <typename T>
__global__ void gather_columns_kernel(const T* __restrict__ x, std::int64_t m, std::int64_t k,
                                      const std::int32_t* __restrict__ permutation,
                                      T* __restrict__ out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m * k) return;
  const std::int64_t row = i / k, col = i % k;
  out[i] = x[row * k + permutation[col]];
}

int sm_count() {
  // One entry per device ordinal: the attribute never changes, and the launch path must not
  // make a runtime query per matmul.
  static std::array<std::atomic<int>, 64> cached{};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 132;
  int sms = cached[static_cast<std::size_t>(device)].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      return 132;
    }
    cached[static_cast<std::size_t>(device)].store(sms, std::memory_order_relaxed);
  }
  return sms;
}

struct Plan {
  int m_tiles = 1;   // 16-row tiles of x per CTA: 1, 2 or 4
  int m_blocks = 1;  // CTAs along m
  int n_tiles = 0;   // 16-row weight tiles
  int k_tiles = 0;   // 64-column weight tiles
  int splits = 1;    // CTAs along K
  int tiles_per_split = 0;
};

void set_splits(Plan& p, int splits) {
  p.splits = std::max(1, splits);
  p.tiles_per_split = (p.k_tiles + p.splits - 1) / p.splits;
  p.splits = (p.k_tiles + p.tiles_per_split - 1) / p.tiles_per_split;
}

// Enough CTAs to give every SM kCtasPerSm when the weight has too few row tiles, without
// leaving a warp fewer than kMinTilesPerWarp tiles.
Plan plan_for(std::int64_t m, std::int64_t n, std::int64_t k) {
  Plan p;
  p.m_tiles = m <= 16 ? 1 : m <= 32 ? 2 : 4;
  p.m_blocks = static_cast<int>((m + 16 * p.m_tiles - 1) / (16 * p.m_tiles));
  p.n_tiles = static_cast<int>((n + kTileRows - 1) / kTileRows);
  p.k_tiles = static_cast<int>((k + kTileCols - 1) / kTileCols);
  const int ctas = p.n_tiles * p.m_blocks;
  const int wanted = (kCtasPerSm * sm_count() + ctas - 1) / ctas;
  const int most = std::max(1, p.k_tiles / (kWarps * kMinTilesPerWarp));
  set_splits(p, std::min(wanted, most));
  return p;
}

std::size_t partial_bytes(const Plan& p, std::int64_t m, std::int64_t n) {
  return p.splits > 1 ? static_cast<std::size_t>(p.splits) * m * n * sizeof(float) : 0;
}

template <typename T, int kMTiles>
Status launch_tiles(const W4A16GemmParams& p, const Plan& plan, float* partial,
                    cudaStream_t stream) {
  const dim3 grid(plan.n_tiles, plan.splits, plan.m_blocks);
  w4a16_gemm_kernel<T, kMTiles><<<grid, kThreads, 0, stream>>>(
      static_cast<const T*>(p.x), reinterpret_cast<const uint4*>(p.w.packed),
      reinterpret_cast<const __half*>(p.w.scales), p.w.zeros, static_cast<const T*>(p.bias),
      static_cast<T*>(p.y), partial, static_cast<int>(p.m), static_cast<int>(p.w.rows),
      static_cast<int>(p.w.cols), plan.k_tiles, plan.n_tiles * kTileRows,
      static_cast<int>(p.w.group_size),
      static_cast<int>((p.w.cols + p.w.group_size - 1) / p.w.group_size), plan.tiles_per_split);
  return cuda::check_launch("w4a16_gemm_kernel");
}

template <typename T>
Status launch_typed(const W4A16GemmParams& p, cudaStream_t stream) {
  Plan plan = plan_for(p.m, p.w.rows, p.w.cols);
  if (partial_bytes(plan, p.m, p.w.rows) > p.workspace_bytes || p.workspace == nullptr) {
    const std::size_t per_split = static_cast<std::size_t>(p.m) * p.w.rows * sizeof(float);
    const auto fits = p.workspace == nullptr ? 0 : static_cast<int>(p.workspace_bytes / per_split);
    set_splits(plan, fits >= 2 ? std::min(fits, plan.splits) : 1);
  }
  float* partial = plan.splits > 1 ? p.workspace : nullptr;
  Status s = plan.m_tiles == 1   ? launch_tiles<T, 1>(p, plan, partial, stream)
             : plan.m_tiles == 2 ? launch_tiles<T, 2>(p, plan, partial, stream)
                                 : launch_tiles<T, 4>(p, plan, partial, stream);
  PAGODA_RETURN_IF_ERROR(s);
  if (partial == nullptr) return Status::ok_status();
  const std::size_t outputs = static_cast<std::size_t>(p.m) * p.w.rows;
  const auto blocks = static_cast<unsigned>((outputs + 255) / 256);
  w4a16_reduce_kernel<T><<<blocks, 256, 0, stream>>>(
      partial, plan.splits, static_cast<const T*>(p.bias), static_cast<T*>(p.y),
      static_cast<int>(p.m), static_cast<int>(p.w.rows));
  return cuda::check_launch("w4a16_reduce_kernel");
}

bool is_16_bit(cuda::ScalarType t) {
  return t == cuda::ScalarType::kBF16 || t == cuda::ScalarType::kF16;
}

unsigned blocks_for(std::int64_t elements, int threads) {
  return static_cast<unsigned>((elements + threads - 1) / threads);
}

}  // namespace

std::size_t w4a16_gemm_workspace_bytes(std::int64_t m, std::int64_t n, std::int64_t k) {
  return partial_bytes(plan_for(m, n, k), m, n);
}

bool w4a16_gemm_applies(const W4A16GemmParams& p) {
  const auto aligned = [](const void* ptr, std::uintptr_t to) {
    return reinterpret_cast<std::uintptr_t>(ptr) % to == 0;
  };
  return is_16_bit(p.dtype) && p.m >= 1 && p.w.rows >= 1 && p.w.cols >= 32 && p.w.cols % 32 == 0 &&
         p.w.group_size >= 32 && p.w.group_size % 32 == 0 && p.m <= (1 << 24) &&
         p.w.rows <= (1 << 24) && p.w.cols <= (1 << 24) && aligned(p.x, 4) &&
         aligned(p.w.packed, 16) && aligned(p.w.scales, 4) && p.y != nullptr;
}

Status launch_w4a16_gemm(const W4A16GemmParams& p, cudaStream_t stream) {
  if (!w4a16_gemm_applies(p)) {
    return invalid_argument("w4a16 gemm: unsupported shape, dtype or alignment (m " +
                            std::to_string(p.m) + ", " + std::to_string(p.w.rows) + " x " +
                            std::to_string(p.w.cols) + ", group " + std::to_string(p.w.group_size) +
                            ")");
  }
  return p.dtype == cuda::ScalarType::kBF16 ? launch_typed<__nv_bfloat16>(p, stream)
                                            : launch_typed<__half>(p, stream);
}

Status launch_w4a16_dequantize(const W4A16Weights& w, void* out, cuda::ScalarType dtype,
                               cudaStream_t stream) {
  if (!is_16_bit(dtype) || w.rows < 1 || w.cols < 32 || w.cols % 32 != 0 || w.group_size < 32) {
    return invalid_argument("w4a16 dequantize: unsupported shape or dtype");
  }
  const std::int64_t k_tiles = (w.cols + kTileCols - 1) / kTileCols;
  const std::int64_t padded_rows = (w.rows + kTileRows - 1) / kTileRows * kTileRows;
  const unsigned blocks = blocks_for(w.rows * w.cols, 256);
  const auto* scales = reinterpret_cast<const __half*>(w.scales);
  if (dtype == cuda::ScalarType::kBF16) {
    w4a16_dequantize_kernel<<<blocks, 256, 0, stream>>>(w.packed, scales, w.zeros,
                                                        static_cast<__nv_bfloat16*>(out), w.rows,
                                                        w.cols, k_tiles, padded_rows, w.group_size);
  } else {
    w4a16_dequantize_kernel<<<blocks, 256, 0, stream>>>(w.packed, scales, w.zeros,
                                                        static_cast<__half*>(out), w.rows, w.cols,
                                                        k_tiles, padded_rows, w.group_size);
  }
  return cuda::check_launch("w4a16_dequantize_kernel");
}

Status launch_gather_columns(const void* x, std::int64_t m, std::int64_t k,
                             const std::int32_t* permutation, void* out, cuda::ScalarType dtype,
                             cudaStream_t stream) {
  if (!is_16_bit(dtype) || m < 0 || k < 1) {
    return invalid_argument("gather columns: unsupported shape or dtype");
  }
  if (m == 0) return Status::ok_status();
  const unsigned blocks = blocks_for(m * k, 256);
  if (dtype == cuda::ScalarType::kBF16) {
    gather_columns_kernel<<<blocks, 256, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), m, k, permutation, static_cast<__nv_bfloat16*>(out));
  } else {
    gather_columns_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(x), m, k,
                                                      permutation, static_cast<__half*>(out));
  }
  return cuda::check_launch("gather_columns_kernel");
}

}  // namespace pagoda::kernels
