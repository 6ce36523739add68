// Small kernels that exercise the CUDA emulation itself (tests/emulated/cuda_emulation_test.cc),
// compiled as host C++ with the emulation header forced in.
#include "tests/emulated/cuda_emulation_kernels.h"

#include <cstdint>

#include "kernels/common/async_copy.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/emulation/cub_emulation.h"

namespace pagoda::emulated_test {

namespace {

// One warp: A (16x16) and B (16x8, k x n) from row-major global arrays of 16-bit bits, into the
// fragments of mma.m16n8k16 (kernels/common/mma.cuh's layout), D = C + A B out by the same map.
template <typename T>
__global__ void mma_kernel(const std::uint16_t* a, const std::uint16_t* b, const float* c,
                           float* d) {
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  const auto pair = [](const std::uint16_t* m, int stride, int r0, int c0, int r1, int c1) {
    return static_cast<std::uint32_t>(m[r0 * stride + c0]) |
           static_cast<std::uint32_t>(m[r1 * stride + c1]) << 16;
  };
  const std::uint32_t frag_a[4] = {
      pair(a, 16, g, 2 * t, g, 2 * t + 1), pair(a, 16, g + 8, 2 * t, g + 8, 2 * t + 1),
      pair(a, 16, g, 2 * t + 8, g, 2 * t + 9), pair(a, 16, g + 8, 2 * t + 8, g + 8, 2 * t + 9)};
  const std::uint32_t b0 = pair(b, 8, 2 * t, g, 2 * t + 1, g);
  const std::uint32_t b1 = pair(b, 8, 2 * t + 8, g, 2 * t + 9, g);
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t],
                  c[(g + 8) * 8 + 2 * t + 1]};
  kernels::mma_16816<T>(acc, frag_a, b0, b1);
  d[g * 8 + 2 * t] = acc[0];
  d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2];
  d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

// A 16x16 tile of 16-bit elements into shared memory, then ldmatrix .x4 (plain or transposed)
// with the usual addressing (lane l gives row l % 16 of the 8-column half l / 16); each lane
// writes its 4 registers.
template <bool kTrans>
__global__ void ldmatrix_kernel(const std::uint16_t* tile, std::uint32_t* out) {
  PAGODA_DYNAMIC_SHARED(smem);
  const int lane = static_cast<int>(threadIdx.x);
  auto* s = reinterpret_cast<std::uint16_t*>(smem);
  for (int i = lane; i < 256; i += 32) s[i] = tile[i];
  __syncwarp();
  const std::uint32_t addr = kernels::smem_u32(s + (lane % 16) * 16 + (lane / 16) * 8);
  std::uint32_t r[4];
  if constexpr (kTrans) {
    kernels::ldmatrix_x4_trans(r, addr);
  } else {
    kernels::ldmatrix_x4(r, addr);
  }
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = r[i];
}

__global__ void shuffle_kernel(int* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int v = 100 * warp + lane;
  int* o = out + warp * 32 * 4 + lane * 4;
  o[0] = __shfl_xor_sync(0xffffffffu, v, 5);
  o[1] = __shfl_sync(0xffffffffu, v, 7);
  o[2] = __shfl_sync(0xffffffffu, v, lane + 1, 8);
  o[3] = __shfl_down_sync(0xffffffffu, v, 3);
}

__global__ void votes_kernel(unsigned* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const unsigned ballot = __ballot_sync(0xffffffffu, (7 * lane + warp) % 5 == 2);
  unsigned* o = out + (warp * 32 + lane) * 4;
  o[0] = ballot;
  o[1] = static_cast<unsigned>(__ffs(static_cast<int>(ballot)));
  o[2] = static_cast<unsigned>(__clz(static_cast<int>(ballot)));
  o[3] = static_cast<unsigned>(__any_sync(0xffffffffu, lane == 3 * warp));
}

__global__ void block_scan_kernel(const int* in, int* exclusive, int* total) {
  using BlockScan = cub::BlockScan<int, 128>;
  __shared__ typename BlockScan::TempStorage storage;
  const int t = static_cast<int>(threadIdx.x);
  for (int round = 0; round < 2; ++round) {
    int aggregate = 0;
    BlockScan(storage).ExclusiveSum(in[round * 128 + t], exclusive[round * 128 + t], aggregate);
    if (t == 0) total[round] = aggregate;
    __syncthreads();  // the storage is reused
  }
}

__global__ void partial_mask_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, static_cast<int>(threadIdx.x), 0);
}

// Lane 0 copies 16 bytes into shared memory by cp.async; lane 31 reads them back, after the copy's
// wait and a __syncwarp (kSynced), or with neither (a race the emulation must be able to show).
template <bool kSynced>
__global__ void copy_then_read_kernel(const std::uint32_t* src, std::uint32_t* out) {
  PAGODA_DYNAMIC_SHARED(smem);
  const int lane = static_cast<int>(threadIdx.x);
  if (lane == 0) kernels::cp_async_16(kernels::smem_u32(smem), src, true);
  kernels::cp_async_commit();
  if constexpr (kSynced) {
    kernels::cp_async_wait<0>();
    __syncwarp();
  }
  if (lane == 31) out[blockIdx.x] = *reinterpret_cast<const std::uint32_t*>(smem);
  if constexpr (!kSynced) kernels::cp_async_wait<0>();
}

}  // namespace

void emulated_mma(bool bf16, const std::uint16_t* a, const std::uint16_t* b, const float* c,
                  float* d) {
  if (bf16) {
    emulation::launch(mma_kernel<__nv_bfloat16>, dim3(1), dim3(32), 0, nullptr, a, b, c, d);
  } else {
    emulation::launch(mma_kernel<__half>, dim3(1), dim3(32), 0, nullptr, a, b, c, d);
  }
}

void emulated_ldmatrix(bool trans, const std::uint16_t* tile, std::uint32_t* out) {
  if (trans) {
    emulation::launch(ldmatrix_kernel<true>, dim3(1), dim3(32), 512, nullptr, tile, out);
  } else {
    emulation::launch(ldmatrix_kernel<false>, dim3(1), dim3(32), 512, nullptr, tile, out);
  }
}

void emulated_shuffles(int* out) {
  emulation::launch(shuffle_kernel, dim3(1), dim3(64), 0, nullptr, out);
}

void emulated_votes(unsigned* out) {
  emulation::launch(votes_kernel, dim3(1), dim3(64), 0, nullptr, out);
}

void emulated_block_scan(const int* in, int* exclusive, int* total) {
  emulation::launch(block_scan_kernel, dim3(1), dim3(128), 0, nullptr, in, exclusive, total);
}

void emulated_partial_mask_shuffle(int* out) {
  emulation::launch(partial_mask_kernel, dim3(1), dim3(32), 0, nullptr, out);
}

namespace {
// CTA i marks itself done, then reads whether its partner i ^ 1 has: a race between CTAs.
__global__ void partner_done_kernel(int* done, int* seen) {
  const int i = static_cast<int>(blockIdx.x);
  if (threadIdx.x == 0) {
    done[i] = 1;
    seen[i] = done[i ^ 1];
  }
}
}  // namespace

void emulated_partner_done(int blocks, int* done, int* seen) {
  emulation::launch(partner_done_kernel, dim3(blocks), dim3(32), 0, nullptr, done, seen);
}

void emulated_copy_then_read(bool synced, int blocks, const std::uint32_t* src,
                             std::uint32_t* out) {
  if (synced) {
    emulation::launch(copy_then_read_kernel<true>, dim3(blocks), dim3(32), 16, nullptr, src, out);
  } else {
    emulation::launch(copy_then_read_kernel<false>, dim3(blocks), dim3(32), 16, nullptr, src, out);
  }
}

}  // namespace pagoda::emulated_test
