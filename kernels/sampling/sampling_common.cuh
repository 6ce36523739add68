// Device pieces the row-per-block sampling kernels share: an order-preserving integer key for
// floats, the block-wide "best (value, id), lowest id on ties" reduction, and radix select over
// such keys (the k-th largest, or the largest cut-off whose elements reach a mass).
#pragma once

#include <cstdint>

namespace pagoda::kernels::sampling_detail {

/// An unsigned key that orders like the float (-inf lowest; -0 and +0 the same key, as they
/// compare equal), so cut-offs found on keys keep exactly the floats >= the cut-off's value.
__device__ __forceinline__ std::uint32_t order_key(float f) {
  const std::uint32_t bits = f == 0.0f ? 0u : __float_as_uint(f);
  return (bits & 0x80000000u) != 0u ? ~bits : bits | 0x80000000u;
}

/// for (i = threadIdx.x; i < n; i += kThreads) use(i, load(i)), with the loads of kBatch
/// consecutive iterations issued before any is used. A row-per-block kernel reads a whole
/// vocabulary row with one CTA: one 4-byte load in flight per thread left it latency-bound (a
/// few GB/s). Each thread still sees its elements in the same order, so every result is the
/// same bit for bit.
template <int kThreads, int kBatch = 8, typename Load, typename Use>
__device__ __forceinline__ void batched_row_loop(int n, Load load, Use use) {
  using Value = decltype(load(0));
  for (int base = static_cast<int>(threadIdx.x); base < n; base += kThreads * kBatch) {
    Value v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreads;
      if (i < n) v[u] = load(i);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreads;
      if (i < n) use(i, v[u]);
    }
  }
}

/// Whether (a, ia) beats (b, ib): a larger value, or the same value at a lower id.
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {
  return a > b || (a == b && ia < ib);
}

/// The id of the best (value, id) over the block (ids unique; 0x7fffffff when no thread holds
/// one). Every thread must call, and gets the result.
template <int kThreads>
__device__ int block_best(float value, int id) {
  __shared__ float warp_value[kThreads / 32];
  __shared__ int warp_id[kThreads / 32];
  __shared__ int result;
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, id, offset);
    if (better(v, i, value, id)) {
      value = v;
      id = i;
    }
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) {
    warp_value[warp] = value;
    warp_id[warp] = id;
  }
  __syncthreads();
  if (warp == 0) {
    value = lane < kThreads / 32 ? warp_value[lane] : -INFINITY;
    id = lane < kThreads / 32 ? warp_id[lane] : 0x7fffffff;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float v = __shfl_xor_sync(0xffffffffu, value, offset);
      const int i = __shfl_xor_sync(0xffffffffu, id, offset);
      if (better(v, i, value, id)) {
        value = v;
        id = i;
      }
    }
    if (lane == 0) result = id;
  }
  __syncthreads();
  return result;
}

/// Sum of an int over the block; every thread gets it.
template <int kThreads>
__device__ int block_sum_int(int x) {
  __shared__ int partial[kThreads / 32];
  __shared__ int total;
  for (int offset = 16; offset > 0; offset >>= 1) x += __shfl_xor_sync(0xffffffffu, x, offset);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  if (lane == 0) partial[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int y = lane < kThreads / 32 ? partial[lane] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) y += __shfl_xor_sync(0xffffffffu, y, offset);
    if (lane == 0) total = y;
  }
  __syncthreads();
  return total;
}

/// One element as radix select sees it: its key, and its weight (1 to count elements, the
/// probability to weigh mass; 0 leaves it out).
struct RadixItem {
  std::uint32_t key;
  float weight;
};

/// The largest key c such that the elements with key >= c weigh at least `target` in all
/// (item_at(i), i < n): with weights 1 and target k, the k-th largest key. One pass per byte,
/// most significant first, each narrowing the prefix to one of 256 buckets. When rounding leaves
/// the target out of reach, the smallest key with weight (everything is kept); 0 when nothing has
/// weight. Every thread must call, and gets the result.
/// The per-warp histograms of radix_select: one shared array per kernel, whichever instances
/// of radix_select (one per lambda) the kernel holds.
template <int kWarps, int kBins>
__device__ __forceinline__ float (*radix_warp_histograms())[kBins] {
  __shared__ float histograms[kWarps][kBins];
  return histograms;
}

template <int kThreads, typename ItemAt>
__device__ std::uint32_t radix_select(ItemAt item_at, int n, float target) {
  constexpr int kBins = 256;
  constexpr int kWarps = kThreads / 32;
  // One histogram per warp: a whole row's elements fall into a handful of buckets on the first
  // pass (probabilities share few exponents), and 512 threads adding into the same few shared
  // floats serialized the pass. The warps' histograms are then summed in warp order.
  float(*warp_histogram)[kBins] = radix_warp_histograms<kWarps, kBins>();
  __shared__ float histogram[kBins];
  __shared__ std::uint32_t shared_prefix;
  __shared__ float shared_above;
  const int warp_id = static_cast<int>(threadIdx.x) / 32;
  std::uint32_t prefix = 0;
  std::uint32_t mask = 0;
  float above = 0.0f;  // weight of the elements above the current bucket
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kWarps * kBins; b += kThreads) (&warp_histogram[0][0])[b] = 0.0f;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const RadixItem item = item_at(i);
      if (item.weight <= 0.0f || (item.key & mask) != prefix) continue;
      atomicAdd(&warp_histogram[warp_id][(item.key >> shift) & 0xffu], item.weight);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += warp_histogram[w][b];
      histogram[b] = sum;
    }
    __syncthreads();
    // Warp 0 picks the bucket: lane l owns buckets [8l, 8l + 8); suffix sums over lanes find the
    // lane where the running weight (from the top bucket down) crosses the target, and that lane
    // walks its 8 buckets.
    if (threadIdx.x < 32) {
      const int lane = static_cast<int>(threadIdx.x);
      float lane_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) lane_sum += histogram[lane * 8 + j];
      float suffix = lane_sum;  // weight of the buckets of lanes >= this one
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const float other = __shfl_down_sync(0xffffffffu, suffix, offset);
        if (lane + offset < 32) suffix += other;
      }
      const unsigned reach =
          __ballot_sync(0xffffffffu, lane_sum > 0.0f && above + suffix >= target);
      const unsigned nonempty = __ballot_sync(0xffffffffu, lane_sum > 0.0f);
      // The crossing lane: the highest lane whose suffix reaches the target. Failing that, the
      // lowest lane holding anything.
      const int owner = reach != 0 ? 31 - __clz(reach) : __ffs(nonempty) - 1;
      if (owner < 0 && lane == 0) {  // nothing with weight under this prefix
        shared_prefix = prefix;
        shared_above = above;
      }
      if (lane == owner) {
        float cumulative = above + suffix - lane_sum;
        int chosen = -1;
        int lowest_nonempty = -1;
        for (int b = lane * 8 + 7; b >= lane * 8; --b) {
          if (histogram[b] <= 0.0f) continue;
          lowest_nonempty = b;
          if (reach != 0 && cumulative + histogram[b] >= target) {
            chosen = b;
            break;
          }
          cumulative += histogram[b];
        }
        if (chosen < 0) {
          chosen = lowest_nonempty;
          cumulative -= histogram[chosen];
        }
        shared_prefix = prefix | (static_cast<std::uint32_t>(chosen) << shift);
        shared_above = cumulative;
      }
    }
    __syncthreads();
    prefix = shared_prefix;
    above = shared_above;
    mask |= 0xffu << shift;
  }
  return prefix;
}

}  // namespace pagoda::kernels::sampling_detail
