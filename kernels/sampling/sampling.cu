#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/sampling/sampling.h"
#include "kernels/sampling/sampling_common.cuh"
#include "sampling/random_draw.h"

namespace pagoda::kernels {

namespace {

using sampling_detail::batched_row_loop;
using sampling_detail::better;
using sampling_detail::block_best;
using sampling_detail::order_key;
using sampling_detail::radix_select;
using sampling_detail::RadixItem;

constexpr int kThreads = 512;
constexpr int kNoId = 0x7fffffff;

// The largest Gumbel noise token_gumbel() returns is log(2^24) = 16.64; a token whose scaled
// logit lies further than this (plus a rounding margin) below a score already seen cannot win the
// race, so its noise is never computed (the CPU race skips the same tokens).
constexpr float kGumbelMax = 16.75f;
__device__ __forceinline__ float race_cutoff(float best) {
  return best - kGumbelMax - fabsf(best) * 0x1p-20f;
}

// s = l' * (1 / T), rounded once like the CPU's float product (no contraction into a later op).
__device__ __forceinline__ float scaled(float x, float inv_t) {
  return __fmul_rn(x, inv_t);
}

// p = exp(s - max s), in (0, 1] for finite s.
__device__ __forceinline__ float prob(float s, float s_max) {
  return expf(__fsub_rn(s, s_max));
}

// One thread's side of the race: keeps its best (score, id), lowest id on ties.
struct Race {
  float best = -INFINITY;
  int best_id = kNoId;
  float cutoff = -INFINITY;

  __device__ void enter(float s, int id, std::uint64_t key) {
    if (!(s >= cutoff)) return;
    const float score = s + sampling::token_gumbel(key, static_cast<std::uint32_t>(id));
    if (better(score, id, best, best_id)) {
      best = score;
      best_id = id;
      cutoff = race_cutoff(best);
    }
  }
};

// This thread's best (value, id) over its share of x, lowest id on ties.
__device__ void thread_argmax(const float* __restrict__ x, int n, float& best, int& best_id) {
  best = -INFINITY;
  best_id = kNoId;
  batched_row_loop<kThreads>(
      n, [&](int i) { return x[i]; },
      [&](int i, float v) {
        if (better(v, i, best, best_id)) {
          best = v;
          best_id = i;
        }
      });
}

// Index of the largest value, lowest index on ties (all -inf: 0).
__device__ int block_argmax(const float* __restrict__ x, int n) {
  float best;
  int best_id;
  thread_argmax(x, n, best, best_id);
  return block_best<kThreads>(best, best_id);
}

// ---- Cut-offs -------------------------------------------------------------------------------
//
// A token is kept when key(s) >= key_cut (top-k: the k-th largest s, ties kept) and p >= p_cut
// (top-p: the largest p whose tokens at or above it reach top_p of the top-k mass; min-p). Both
// are found by radix select over order-preserving bits, so they are values some token has.
struct Cuts {
  std::uint32_t key_cut = 0;  // order_key of the k-th largest s; 0: no top-k
  float p_cut = 0.0f;         // 0: no probability cut
  float s_max = 0.0f;         // max s, when p_cut is used
};

// The cut-offs over n values s_at(i) whose max is s_max (read only when top-p or min-p is on).
template <typename SAt>
__device__ Cuts find_cuts(SAt s_at, int n, int top_k, float top_p, float min_p, float s_max) {
  Cuts cuts;
  cuts.s_max = s_max;
  if (top_k > 0) {
    cuts.key_cut = radix_select<kThreads>(
        [&](int i) {
          return RadixItem{order_key(s_at(i)), 1.0f};
        },
        n, static_cast<float>(top_k));
  }
  if (top_p < 1.0f) {
    float local = 0.0f;
    batched_row_loop<kThreads>(n, s_at, [&](int, float s) {
      if (order_key(s) >= cuts.key_cut) local += prob(s, s_max);
    });
    const float total = block_sum(local);
    const std::uint32_t bits = radix_select<kThreads>(
        [&](int i) {
          const float s = s_at(i);
          const float p = order_key(s) >= cuts.key_cut ? prob(s, s_max) : 0.0f;
          return RadixItem{__float_as_uint(p), p};
        },
        n, top_p * total);
    cuts.p_cut = __uint_as_float(bits);
  }
  if (min_p > 0.0f) cuts.p_cut = fmaxf(cuts.p_cut, min_p);
  return cuts;
}

__device__ __forceinline__ bool is_kept(float s, const Cuts& cuts) {
  return order_key(s) >= cuts.key_cut && (cuts.p_cut <= 0.0f || prob(s, cuts.s_max) >= cuts.p_cut);
}

// ---- Top-k fast path ------------------------------------------------------------------------
//
// With top-k on (k <= kThreads), everything after the top-k cut happens among at most k tokens
// (plus ties), so the row is not scanned once per radix byte. Instead:
//   1. a sample: thread t takes the max s of element t of every step-th tile of kThreads ids
//      (disjoint groups). The k-th largest of these group maxima, tau, is <= the row's k-th
//      largest s (k distinct groups each hold a value >= tau), so every token top-k keeps has
//      s >= tau. The sample size aims at half of kMaxCandidates for i.i.d. logits.
//   2. one pass over the row collects the finite s >= tau into shared memory. (Tokens at -inf
//      can only be kept when fewer than k are finite, and then never win the race.)
//   3. the cut-offs and the race over the candidates.
// When the candidates overflow (many ties at tau), or nothing finite is found, or the max
// overflows, the row takes the full-row path. Bytes: ~1.05 reads of the row instead of ~10.
constexpr int kMaxCandidates = 2048;

__device__ bool sample_top_k_fast(const float* __restrict__ x, int n, const RowRecord& row,
                                  float inv_t, std::uint64_t key, std::int32_t* out) {
  __shared__ float cand_s[kMaxCandidates];
  __shared__ int cand_id[kMaxCandidates];
  __shared__ float group_max[kThreads];
  __shared__ int cand_count;
  __shared__ float shared_tau;
  const int k = row.top_k;

  // 1. Sample maxima over disjoint groups.
  const int tiles = (n + kThreads - 1) / kThreads;
  const std::int64_t aim = static_cast<std::int64_t>(kThreads) * (kMaxCandidates / 2);
  const int per_group = static_cast<int>(
      ::min((static_cast<std::int64_t>(n) * k + aim - 1) / aim, static_cast<std::int64_t>(tiles)));
  const int step = max(1, tiles / max(per_group, 1));
  float m = -INFINITY;
  for (int tile = 0; tile < tiles; tile += step) {
    const int i = tile * kThreads + static_cast<int>(threadIdx.x);
    if (i < n) m = fmaxf(m, scaled(x[i], inv_t));
  }
  group_max[threadIdx.x] = m;
  if (threadIdx.x == 0) {
    cand_count = 0;
    shared_tau = -INFINITY;
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

  // 2. Candidates: finite s >= tau.
  batched_row_loop<kThreads>(
      n, [&](int i) { return scaled(x[i], inv_t); },
      [&](int i, float s) {
        if (s >= tau && s > -INFINITY) {
          const int slot = atomicAdd(&cand_count, 1);
          if (slot < kMaxCandidates) {
            cand_s[slot] = s;
            cand_id[slot] = i;
          }
        }
      });
  __syncthreads();
  const int num = cand_count;
  if (num > kMaxCandidates || num == 0) return false;

  // 3. The row's max s is among the candidates.
  float local_max = -INFINITY;
  for (int c = threadIdx.x; c < num; c += kThreads) local_max = fmaxf(local_max, cand_s[c]);
  const float s_max = block_max(local_max);
  if (!isfinite(s_max)) return false;
  const auto s_at = [&](int c) { return cand_s[c]; };
  const Cuts cuts = find_cuts(s_at, num, k, row.top_p, row.min_p, s_max);
  Race race;
  for (int c = threadIdx.x; c < num; c += kThreads) {
    const float s = cand_s[c];
    if (is_kept(s, cuts)) race.enter(s, cand_id[c], key);
  }
  const int winner = block_best<kThreads>(race.best, race.best_id);
  if (threadIdx.x == 0) *out = winner;
  return true;
}

// ---- Full-row path --------------------------------------------------------------------------

__device__ void sample_full_row(const float* __restrict__ x, int n, const RowRecord& row,
                                float inv_t, std::uint64_t key, std::int32_t* out) {
  const bool use_p = row.top_p < 1.0f || row.min_p > 0.0f;
  const int k = row.top_k;
  const auto s_at = [&](int i) { return scaled(x[i], inv_t); };
  // The raw argmax rides along: every token masked (max -inf) or a scaled max that overflows
  // leaves the draw undefined, and the CPU then takes the argmax.
  float best_x = -INFINITY;
  int best_x_id = kNoId;
  float s_max = 0.0f;
  if (use_p) {
    thread_argmax(x, n, best_x, best_x_id);
    const int top = block_best<kThreads>(best_x, best_x_id);
    s_max = scaled(x[top], inv_t);
    if (!isfinite(s_max)) {
      if (threadIdx.x == 0) *out = top;
      return;
    }
  }
  const Cuts cuts = find_cuts(s_at, n, k, row.top_p, row.min_p, s_max);
  Race race;
  best_x = -INFINITY;
  best_x_id = kNoId;
  batched_row_loop<kThreads>(
      n, [&](int i) { return x[i]; },
      [&](int i, float v) {
        if (better(v, i, best_x, best_x_id)) {
          best_x = v;
          best_x_id = i;
        }
        const float s = scaled(v, inv_t);
        if (s >= race.cutoff && is_kept(s, cuts)) race.enter(s, i, key);
      });
  const int top = block_best<kThreads>(best_x, best_x_id);
  const int winner = block_best<kThreads>(race.best, race.best_id);
  if (threadIdx.x == 0) *out = isfinite(scaled(x[top], inv_t)) ? winner : top;
}

__global__ void __launch_bounds__(kThreads) sample_tokens_kernel(SampleTokensParams p) {
  const std::int64_t r = blockIdx.x;
  const RowRecord row = p.rows[r];
  std::int32_t* out = p.out_tokens + r;
  if ((row.flags & kRowReturnLogits) != 0u || row.forced_token >= 0) {
    if (threadIdx.x == 0) *out = (row.flags & kRowReturnLogits) != 0u ? -1 : row.forced_token;
    return;
  }
  const int n = static_cast<int>(p.vocab_size);
  const float* x = ((row.flags & kRowProcessed) != 0u ? p.processed : p.logits) + r * n;
  // Greedy; and min_p > 1, which keeps nothing, falls back to the argmax as on the CPU.
  if (row.temperature <= 0.0f || row.top_k == 1 || row.min_p > 1.0f) {
    const int top = block_argmax(x, n);
    if (threadIdx.x == 0) *out = top;
    return;
  }
  const float inv_t = __fdiv_rn(1.0f, row.temperature);
  const std::uint64_t key = sampling::draw_key(row.seed, row.position);
  if (row.top_k > 0 && row.top_k <= kThreads && sample_top_k_fast(x, n, row, inv_t, key, out)) {
    return;
  }
  sample_full_row(x, n, row, inv_t, key, out);
}

}  // namespace

Status launch_sample_tokens(const SampleTokensParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "sample_tokens";
  PAGODA_KERNEL_REQUIRE(p.num_rows >= 0 && p.num_rows <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(p.vocab_size > 0 && p.vocab_size < 0x7fffffff, kOp);
  if (p.num_rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(
      p.logits != nullptr && p.processed != nullptr && p.rows != nullptr && p.out_tokens != nullptr,
      kOp);
  return launch_kernel(sample_tokens_kernel, static_cast<unsigned>(p.num_rows), kThreads, 0, stream,
                       "sample_tokens_kernel", p);
}

}  // namespace pagoda::kernels
