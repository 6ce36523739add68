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

// Radix select over the probabilities' bits (prob_at(i), i < n): the largest value v such that
// the elements >= v (among those with bits >= lower_bits) weigh at least `target`, where an
// element weighs 1 (kMass false: top-k counts) or its probability (kMass true: top-p mass). One
// pass per byte, most significant first; each pass narrows the prefix to one bucket of 256.
template <bool kMass, typename ProbAt>
__device__ std::uint32_t radix_select(ProbAt prob_at, int n, std::uint32_t lower_bits,
                                      float target) {
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
      const float u = prob_at(i);
      const std::uint32_t bits = __float_as_uint(u);
      if (bits < lower_bits || (bits & mask) != prefix) continue;
      atomicAdd(&histogram[(bits >> shift) & 0xffu], kMass ? u : 1.0f);
    }
    __syncthreads();
    // Warp 0 picks the bucket: lane l owns buckets [8l, 8l + 8); suffix sums over lanes find the
    // lane where the running weight (from the top bucket down) crosses the target, and that lane
    // walks its 8 buckets. (A single thread walking all 256 buckets cost ~3 us per pass.)
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
      // The crossing lane: the highest lane whose suffix reaches the target. Failing that
      // (rounding left the target out of reach), the lowest lane holding anything.
      const int owner = reach != 0 ? 31 - __clz(reach) : __ffs(nonempty) - 1;
      if (owner < 0 && lane == 0) {  // nothing left with weight (underflow): keep the prefix
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
          // Keep everything down to this lane's smallest bucket.
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

// ---- Top-k fast path ------------------------------------------------------------------------
//
// With top-k on (k <= kThreads), everything after the top-k stage happens among at most k
// elements (plus ties), so the row need not be scanned once per radix byte. Instead:
//   1. a sample: thread t takes the max of element t of every step-th tile of kThreads ids
//      (disjoint groups). The k-th largest of these kThreads group maxima, tau, is <= the row's
//      k-th largest logit (k distinct groups each hold an element >= tau), so every id the top-k
//      stage keeps has logit >= tau.
//   2. one pass over the row (16-byte loads) collects the ids with logit >= tau into shared
//      memory: about n * k / (kThreads * per_group) of them for i.i.d. logits; the sample size is
//      chosen to expect half of kMaxCandidates.
//   3. the same stages as the full-row path (probabilities relative to the max, radix selects for
//      top-k and top-p, min-p), run over the candidates in shared memory; then the kept ids are
//      sorted by id and the draw is the same inverse CDF in id order.
// When the candidates overflow (many ties at tau, or adversarial orderings) the row takes the
// full-row path. Bytes: ~1.06 reads of the row instead of ~12.
constexpr int kMaxCandidates = 2048;  // 4 per thread: the sort and the scan below assume this
static_assert(kMaxCandidates == 4 * kThreads);

__device__ __forceinline__ void keep_candidate(float x, int i, float tau, int* count, float* xs,
                                               int* ids) {
  if (x >= tau) {
    const int slot = atomicAdd(count, 1);
    if (slot < kMaxCandidates) {
      xs[slot] = x;
      ids[slot] = i;
    }
  }
}

// Returns false (with nothing written) when the candidates overflowed; every thread gets the
// same answer.
__device__ bool sample_top_k_fast(const float* __restrict__ row, int n, int k, float inv_t,
                                  float top_p, float min_p, std::uint64_t seed,
                                  std::uint64_t offset, std::int32_t* out) {
  __shared__ float cand_u[kMaxCandidates];  // logits, then probabilities
  __shared__ int cand_id[kMaxCandidates];
  __shared__ float kept_u[kMaxCandidates];
  __shared__ int kept_id[kMaxCandidates];
  __shared__ float group_max[kThreads];
  __shared__ int cand_count;
  __shared__ int kept_count;
  __shared__ float shared_tau;
  __shared__ float shared_target;

  // 1. Sample maxima over disjoint groups.
  const int tiles = (n + kThreads - 1) / kThreads;
  const std::int64_t aim = static_cast<std::int64_t>(kThreads) * (kMaxCandidates / 2);
  const int per_group = static_cast<int>(
      ::min((static_cast<std::int64_t>(n) * k + aim - 1) / aim, static_cast<std::int64_t>(tiles)));
  const int step = max(1, tiles / max(per_group, 1));
  float m = -INFINITY;
#pragma unroll 4
  for (int tile = 0; tile < tiles; tile += step) {
    const int i = tile * kThreads + static_cast<int>(threadIdx.x);
    if (i < n) m = fmaxf(m, row[i]);
  }
  group_max[threadIdx.x] = m;
  if (threadIdx.x == 0) {
    cand_count = 0;
    kept_count = 0;
    shared_tau = -INFINITY;  // kept if no thread qualifies (NaN): then all ids are candidates
  }
  __syncthreads();
  // The thread(s) holding the k-th largest group max (ties: all hold the same value) publish it.
  int greater = 0;
  int greater_eq = 0;
  for (int j = 0; j < kThreads; ++j) {
    const float g = group_max[j];
    greater += g > m;
    greater_eq += g >= m;
  }
  if (greater < k && greater_eq >= k) shared_tau = m;
  __syncthreads();
  const float tau = shared_tau;

  // 2. Candidates: ids with logit >= tau. Four 16-byte loads in flight per thread.
  if ((n & 3) == 0 && (reinterpret_cast<std::uintptr_t>(row) & 15u) == 0) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int n4 = n >> 2;
    for (int base = 0; base < n4; base += 4 * kThreads) {
      float4 x[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int j = base + u * kThreads + static_cast<int>(threadIdx.x);
        x[u] = j < n4 ? row4[j] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int i = 4 * (base + u * kThreads + static_cast<int>(threadIdx.x));
        if (i >= n) continue;
        keep_candidate(x[u].x, i, tau, &cand_count, cand_u, cand_id);
        keep_candidate(x[u].y, i + 1, tau, &cand_count, cand_u, cand_id);
        keep_candidate(x[u].z, i + 2, tau, &cand_count, cand_u, cand_id);
        keep_candidate(x[u].w, i + 3, tau, &cand_count, cand_u, cand_id);
      }
    }
  } else {
    for (int i = threadIdx.x; i < n; i += kThreads) {
      keep_candidate(row[i], i, tau, &cand_count, cand_u, cand_id);
    }
  }
  __syncthreads();
  const int num = cand_count;
  if (num > kMaxCandidates) return false;

  // 3. The stages of the full-row path, over the candidates (the row max is among them).
  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < num; c += kThreads) local_max = fmaxf(local_max, cand_u[c]);
  const float row_max = block_max(local_max);
  for (int c = threadIdx.x; c < num; c += kThreads) {
    cand_u[c] = scaled_prob(cand_u[c], row_max, inv_t);
  }
  __syncthreads();
  const auto prob = [&](int c) { return cand_u[c]; };
  std::uint32_t cutoff = radix_select<false>(prob, num, 0, static_cast<float>(k));
  if (top_p < 1.0f) {
    float local_mass = 0.0f;
    for (int c = threadIdx.x; c < num; c += kThreads) {
      if (__float_as_uint(cand_u[c]) >= cutoff) local_mass += cand_u[c];
    }
    const float kept_mass = block_sum(local_mass);
    cutoff = max(cutoff, radix_select<true>(prob, num, cutoff, top_p * kept_mass));
  }
  if (min_p > 0.0f) cutoff = max(cutoff, __float_as_uint(fminf(min_p, 1.0f)));

  for (int c = threadIdx.x; c < num; c += kThreads) {
    const float u = cand_u[c];
    if (__float_as_uint(u) >= cutoff && u > 0.0f) {
      const int slot = atomicAdd(&kept_count, 1);
      kept_u[slot] = u;
      kept_id[slot] = cand_id[c];
    }
  }
  __syncthreads();
  const int kept = kept_count;
  int padded = 1;
  while (padded < kept) padded <<= 1;
  for (int i = kept + static_cast<int>(threadIdx.x); i < padded; i += kThreads) {
    kept_u[i] = 0.0f;
    kept_id[i] = 0x7fffffff;
  }
  __syncthreads();
  // Bitonic sort of the kept (id, probability) pairs by id, so the draw walks ids in order.
  for (int size = 2; size <= padded; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < padded / 2; i += kThreads) {
        const int lo = 2 * i - (i & (stride - 1));
        const int hi = lo + stride;
        const bool ascending = (lo & size) == 0;
        if ((kept_id[lo] > kept_id[hi]) == ascending) {
          const int id = kept_id[lo];
          kept_id[lo] = kept_id[hi];
          kept_id[hi] = id;
          const float u = kept_u[lo];
          kept_u[lo] = kept_u[hi];
          kept_u[hi] = u;
        }
      }
      __syncthreads();
    }
  }

  // Inverse CDF in id order: the first kept id whose running mass reaches u * total.
  float w[4];
  float inclusive[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int idx = 4 * static_cast<int>(threadIdx.x) + j;
    w[j] = idx < kept ? kept_u[idx] : 0.0f;
  }
  using BlockScan = cub::BlockScan<float, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  float total;
  BlockScan(scan_storage).InclusiveSum(w, inclusive, total);
  if (threadIdx.x == 0) {
    curandStatePhilox4_32_10_t state;
    curand_init(seed, offset, 0, &state);
    shared_target = curand_uniform(&state) * total;  // (0, total]
  }
  __syncthreads();
  const float target = shared_target;
  int hit = 0x7fffffff;
#pragma unroll
  for (int j = 3; j >= 0; --j) {
    if (w[j] > 0.0f && inclusive[j] >= target) hit = 4 * static_cast<int>(threadIdx.x) + j;
  }
  const int first = block_min_index(hit);
  if (threadIdx.x == 0) {
    // The float running sum fell short of the float total: take the last kept id.
    *out = first != 0x7fffffff ? kept_id[first] : kept_id[max(kept - 1, 0)];
  }
  return true;
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
  if (k > 0 && k < vocab_size && k <= kThreads &&
      sample_top_k_fast(row, vocab_size, k, inv_t, top_p[r], min_p[r], seeds[r], offsets[r],
                        out + r)) {
    return;
  }
  float local_max = -INFINITY;
  for (int i = threadIdx.x; i < vocab_size; i += kThreads) local_max = fmaxf(local_max, row[i]);
  const float row_max = block_max(local_max);
  const auto prob = [&](int i) { return scaled_prob(row[i], row_max, inv_t); };

  // Cut-offs as probability bits; an element is kept when its bits are >= all of them.
  std::uint32_t cutoff = 0;
  if (k > 0 && k < vocab_size) {
    cutoff = radix_select<false>(prob, vocab_size, 0, static_cast<float>(k));
  }
  const float p = top_p[r];
  if (p < 1.0f) {
    float local_mass = 0.0f;
    for (int i = threadIdx.x; i < vocab_size; i += kThreads) {
      const float u = scaled_prob(row[i], row_max, inv_t);
      if (__float_as_uint(u) >= cutoff) local_mass += u;
    }
    const float kept_mass = block_sum(local_mass);
    cutoff = max(cutoff, radix_select<true>(prob, vocab_size, cutoff, p * kept_mass));
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
