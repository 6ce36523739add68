// Block-wide sum and max for the row-per-block kernels (norms, sampling): warp shuffles, then one
// value per warp through shared memory. Every thread of the block must call, and gets the result.
#pragma once

namespace pagoda::kernels {

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  }
  return x;
}

/// Sum over the block; blockDim.x a multiple of 32, at most 1024.
__device__ __forceinline__ float block_sum(float x) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  x = warp_sum(x);
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = blockDim.x >> 5;
    float y = lane < num_warps ? partial[lane] : 0.0f;
    y = warp_sum(y);
    if (lane == 0) total = y;
  }
  __syncthreads();
  return total;
}

/// Max over the block; blockDim.x a multiple of 32, at most 1024.
__device__ __forceinline__ float block_max(float x) {
  __shared__ float partial[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  x = warp_max(x);
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    const int num_warps = blockDim.x >> 5;
    float y = lane < num_warps ? partial[lane] : -INFINITY;
    y = warp_max(y);
    if (lane == 0) total = y;
  }
  __syncthreads();
  return total;
}

}  // namespace pagoda::kernels
