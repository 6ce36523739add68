// Tensor-core building blocks shared by the mma.sync kernels (prefill attention, W4A16 GEMM).
//
// mma.m16n8k16 fragments (PTX ISA, "Matrix fragments for mma.m16n8k16"), lane = 4 g + t:
//   A (16x16, row-major)  a0 = (row g, cols 2t, 2t+1)   a1 = (row g+8, the same cols)
//                         a2 = (row g, cols 2t+8, 2t+9) a3 = (row g+8, cols 2t+8, 2t+9)
//   B (16x8, k x n)       b0 = (k 2t, 2t+1; col g)      b1 = (k 2t+8, 2t+9; col g)
//   C/D (16x8, fp32)      d0, d1 = (row g, cols 2t, 2t+1)  d2, d3 = (row g+8, the same cols)
// Each 32-bit register holds two 16-bit elements, the lower index in the low half.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace pagoda::kernels {

#if defined(PAGODA_CUDA_EMULATION)
/// The emulation's mma: the warp's fragments exchanged, each lane's four outputs summed from the
/// whole tiles (products exact in fp64, the sum added to d and rounded once to fp32; the tensor
/// cores' own rounding differs in the last bits).
template <typename T>
inline void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                      std::uint32_t b1) {
  struct Operands {
    std::uint32_t a[4], b0, b1;
  };
  const Operands mine{{a[0], a[1], a[2], a[3]}, b0, b1};
  const auto* all =
      reinterpret_cast<const Operands*>(emulation::warp_exchange(&mine, sizeof(Operands)));
  const auto value = [](std::uint32_t word, int half) {
    const auto bits = static_cast<unsigned short>(word >> (16 * half));
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      // A bfloat16 is the top half of the float it widens to.
      return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
    } else {
      __half_raw raw;
      raw.x = bits;
      return static_cast<double>(__half2float(__half(raw)));
    }
  };
  // A[r][k] and B[k][c] from the lanes that hold them (the layout above).
  const auto a_at = [&](int r, int k) {
    const Operands& o = all[4 * (r % 8) + (k % 8) / 2];
    return value(o.a[(r / 8) + 2 * (k / 8)], k % 2);
  };
  const auto b_at = [&](int k, int c) {
    const Operands& o = all[4 * c + (k % 8) / 2];
    return value(k < 8 ? o.b0 : o.b1, k % 2);
  };
  const int lane = emulation::lane_id(), g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int r = g + 8 * (e / 2), c = 2 * t + e % 2;
    double sum = 0.0;
    for (int k = 0; k < 16; ++k) sum += a_at(r, k) * b_at(k, c);
    d[e] = static_cast<float>(static_cast<double>(d[e]) + sum);
  }
}

inline void lds_u32(std::uint32_t& r, std::uint32_t addr) {
  std::memcpy(&r, emulation::shared_pointer(addr), 4);
}

// ldmatrix .x4: lanes 8i..8i+7 give the row addresses of 8x8 matrix i; lane L receives matrix
// i's row L / 4, columns 2 (L % 4) and + 1 in r[i] (transposed: column L / 4, rows 2 (L % 4)
// and + 1).
template <bool kTrans>
inline void emulated_ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  const auto* rows = reinterpret_cast<const std::uint32_t*>(
      emulation::warp_exchange(&addr, sizeof(std::uint32_t)));
  const int lane = emulation::lane_id();
  const auto element = [](std::uint32_t row_address, int column) {
    std::uint16_t v;
    std::memcpy(&v, emulation::shared_pointer(row_address + 2 * column), 2);
    return static_cast<std::uint32_t>(v);
  };
  for (int i = 0; i < 4; ++i) {
    if constexpr (kTrans) {
      r[i] = element(rows[8 * i + 2 * (lane % 4)], lane / 4) |
             element(rows[8 * i + 2 * (lane % 4) + 1], lane / 4) << 16;
    } else {
      r[i] = element(rows[8 * i + lane / 4], 2 * (lane % 4)) |
             element(rows[8 * i + lane / 4], 2 * (lane % 4) + 1) << 16;
    }
  }
}
inline void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  emulated_ldmatrix_x4<false>(r, addr);
}
inline void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  emulated_ldmatrix_x4<true>(r, addr);
}

/// ex2.approx.ftz: results and inputs below 2^-126 flush to zero.
inline float fast_exp2(float x) {
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}
#else
/// d (16x8 fp32) += a (16x16, row) * b (16x8, col), in T (bf16 or f16).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

/// One 32-bit shared-memory load at a shared-window address (as ldmatrix's), ordered like it.
__device__ __forceinline__ void lds_u32(std::uint32_t& r, std::uint32_t addr) {
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(r) : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

/// 2^x with one MUFU.EX2: exp2f adds a denormal-range rescale around it, several instructions per
/// score in the softmax that no tensor instruction overlaps within the warp. Results below 2^-126
/// flush to zero, which P (rounded to bf16/f16 next) and the row sums never notice;
/// ex2(-inf) = +0 keeps masked scores and the first tile's correction exact.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
#endif

/// Two floats as one register of T pairs (low half = first).
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

/// Byte offset of (row, 16-byte chunk) in a swizzled tile of kHeadDim-element 16-bit rows: chunk
/// c of row r is stored at chunk c ^ (r & 7), so the 8 row addresses of one ldmatrix phase hit 8
/// distinct 16-byte bank groups (unswizzled, all 8 rows start in the same bank: 8-way conflicts).
template <int kHeadDim>
__device__ __forceinline__ std::uint32_t swizzled(int row, int chunk) {
  return static_cast<std::uint32_t>((row * kHeadDim + ((chunk ^ (row & 7)) * 8)) * 2);
}

}  // namespace pagoda::kernels
