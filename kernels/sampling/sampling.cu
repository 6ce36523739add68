#include <curand_kernel.h>

#include <cub/block/block_scan.cuh>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/sampling/sampling.h"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 512;
constexpr int kBins = 256;

// Smallest index among threads with `hit`, or INT_MAX.
__device__ int block_min_index(int index) {
  __shared__ int partial[32];
  __shared__ int result;
  for (int offset = 16; offset > 0; offset >>= 1) {
    index = min(index, __shfl_xor_sync(0xffffffffu, index, offset));
  }
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = index;
  __syncthreads();
  if (threadIdx.x < 32) {
    int v = threadIdx.x < (kThreads >> 5) ? partial[threadIdx.x] : 0x7fffffff;
    for (int offset = 16; offset > 0; offset >>= 1) {
      v = min(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    if (threadIdx.x == 0) result = v;
  }
  __syncthreads();
  return result;
}

// Index of the largest logit, lowest index on ties.
__device__ int block_argmax(const float* row, int n) {
  float best = -INFINITY;
  int best_index = 0x7fffffff;
  for (int i = threadIdx.x; i < n; i += kThreads) {
    if (row[i] > best) {  // i increases, so the first maximum of this thread stays
      best = row[i];
      best_index = i;
    }
  }
  const float row_max = block_max(best);
  return block_min_index(best == row_max ? best_index : 0x7fffffff);
}

// Unnormalized probability exp((logit - max) / T), in (0, 1]; its bits order like its value.
__device__ __forceinline__ float scaled_prob(float logit, float row_max, float inv_temperature) {
  return expf((logit - row_max) * inv_temperature);
}

// Radix select over the probabilities' bits: the largest value v such that the elements >= v
// (among those with bits >= lower_bits) weigh at least `target`, where an element weighs 1
// (kMass false: top-k counts) or its probability (kMass true: top-p mass). One pass per byte,
// most significant first; each pass narrows the prefix to one bucket of 256.
template <bool kMass>
__device__ std::uint32_t radix_select(const float* row, int n, float row_max, float inv_t,
                                      std::uint32_t lower_bits, float target) {
  __shared__ float histogram[kBins];
  __shared__ std::uint32_t shared_prefix;
  __shared__ float shared_above;
  std::uint32_t prefix = 0;
  std::uint32_t mask = 0;
  float above = 0.0f;  // weight of the elements above the current bucket
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) histogram[b] = 0.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float u = scaled_prob(row[i], row_max, inv_t);
      const std::uint32_t bits = __float_as_uint(u);
      if (bits < lower_bits || (bits & mask) != prefix) continue;
      atomicAdd(&histogram[(bits >> shift) & 0xffu], kMass ? u : 1.0f);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      float cumulative = above;
      int chosen = -1;
      int lowest_nonempty = -1;
      for (int b = kBins - 1; b >= 0; --b) {
        if (histogram[b] <= 0.0f) continue;
        lowest_nonempty = b;
        if (cumulative + histogram[b] >= target) {
          chosen = b;
          break;
        }
        cumulative += histogram[b];
      }
      if (chosen < 0) {
        // Rounding left the target out of reach: keep everything down to the smallest element.
        chosen = lowest_nonempty;
        cumulative -= histogram[chosen];
      }
      shared_prefix = prefix | (static_cast<std::uint32_t>(chosen) << shift);
      shared_above = cumulative;
    }
    __syncthreads();
    prefix = shared_prefix;
    above = shared_above;
    mask |= 0xffu << shift;
  }
  return prefix;
}

__global__ void __launch_bounds__(kThreads)
    sample_tokens_kernel(const float* __restrict__ logits, int vocab_size,
                         const float* __restrict__ temperature,
                         const std::int32_t* __restrict__ top_k, const float* __restrict__ top_p,
                         const float* __restrict__ min_p, const std::uint64_t* __restrict__ seeds,
                         const std::uint64_t* __restrict__ offsets,
                         std::int32_t* __restrict__ out) {
  const std::int64_t r = blockIdx.x;
  const float* row = logits + r * vocab_size;
  const float t = temperature[r];
  const int k = top_k[r];
  if (t <= 0.0f || k == 1) {
    const int best = block_argmax(row, vocab_size);
    if (threadIdx.x == 0) out[r] = best;
    return;
  }
  const float inv_t = 1.0f / t;
  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < vocab_size; i += kThreads) local_max = fmaxf(local_max, row[i]);
  const float row_max = block_max(local_max);

  // Cut-offs as probability bits; an element is kept when its bits are >= all of them.
  std::uint32_t cutoff = 0;
  if (k > 0 && k < vocab_size) {
    cutoff = radix_select<false>(row, vocab_size, row_max, inv_t, 0, static_cast<float>(k));
  }
  const float p = top_p[r];
  if (p < 1.0f) {
    float local_mass = 0.0f;
    for (int i = threadIdx.x; i < vocab_size; i += kThreads) {
      const float u = scaled_prob(row[i], row_max, inv_t);
      if (__float_as_uint(u) >= cutoff) local_mass += u;
    }
    const float kept_mass = block_sum(local_mass);
    cutoff =
        max(cutoff, radix_select<true>(row, vocab_size, row_max, inv_t, cutoff, p * kept_mass));
  }
  // The top probability is exactly 1 here, so min-p's bound is min_p itself.
  const float mp = min_p[r];
  if (mp > 0.0f) cutoff = max(cutoff, __float_as_uint(fminf(mp, 1.0f)));

  float local_kept = 0.0f;
  int local_last = -1;
  for (int i = threadIdx.x; i < vocab_size; i += kThreads) {
    const float u = scaled_prob(row[i], row_max, inv_t);
    if (__float_as_uint(u) >= cutoff && u > 0.0f) {
      local_kept += u;
      local_last = i;
    }
  }
  const float kept = block_sum(local_kept);
  const int last_kept = -block_min_index(-local_last);

  __shared__ float shared_target;
  if (threadIdx.x == 0) {
    curandStatePhilox4_32_10_t state;
    curand_init(seeds[r], offsets[r], 0, &state);
    shared_target = curand_uniform(&state) * kept;  // (0, kept]
  }
  __syncthreads();
  const float target = shared_target;

  // Inverse CDF in id order: the first kept id whose running mass reaches the target.
  using BlockScan = cub::BlockScan<float, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  float running = 0.0f;
  for (int base = 0; base < vocab_size; base += kThreads) {
    const int i = base + threadIdx.x;
    float w = 0.0f;
    if (i < vocab_size) {
      const float u = scaled_prob(row[i], row_max, inv_t);
      if (__float_as_uint(u) >= cutoff) w = u;
    }
    float inclusive;
    float tile_total;
    BlockScan(scan_storage).InclusiveSum(w, inclusive, tile_total);
    const bool hit = w > 0.0f && running + inclusive >= target;
    const int first = block_min_index(hit ? i : 0x7fffffff);
    if (first != 0x7fffffff) {
      if (threadIdx.x == 0) out[r] = first;
      return;
    }
    running += tile_total;
    __syncthreads();  // scan_storage is reused
  }
  // The float running sum fell short of the float total: take the last kept id.
  if (threadIdx.x == 0) out[r] = last_kept;
}

}  // namespace

Status launch_sample_tokens(const TokenSamplingParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "sample_tokens";
  PAGODA_KERNEL_REQUIRE(p.num_rows >= 0 && p.num_rows <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(p.vocab_size > 0 && p.vocab_size < 0x7fffffff, kOp);
  if (p.num_rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.logits != nullptr && p.temperature != nullptr && p.top_k != nullptr &&
                            p.top_p != nullptr && p.min_p != nullptr && p.seeds != nullptr &&
                            p.offsets != nullptr && p.out_tokens != nullptr,
                        kOp);
  sample_tokens_kernel<<<static_cast<unsigned>(p.num_rows), kThreads, 0, stream>>>(
      p.logits, static_cast<int>(p.vocab_size), p.temperature, p.top_k, p.top_p, p.min_p, p.seeds,
      p.offsets, p.out_tokens);
  return cuda::check_launch("sample_tokens_kernel");
}

}  // namespace pagoda::kernels
