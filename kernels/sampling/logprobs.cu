#include <string>

#if defined(PAGODA_CUDA_EMULATION)
#include "kernels/emulation/cub_emulation.h"
#else
#include <cub/block/block_scan.cuh>
#endif

#include "backend/cuda/cuda_status.h"
#include "kernels/common/block_reduce.cuh"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/sampling/logprobs.h"
#include "kernels/sampling/sampling_common.cuh"

namespace pagoda::kernels {

namespace {

using sampling_detail::better;
using sampling_detail::block_best;
using sampling_detail::block_sum_int;
using sampling_detail::order_key;
using sampling_detail::radix_select;
using sampling_detail::RadixItem;

constexpr int kThreads = 512;
constexpr int kMaxCandidates = 2048;
constexpr int kNoId = 0x7fffffff;

// The top `num` (value, id) pairs, best first, in shared memory.
struct TopList {
  float value[kMaxLogprobs];
  int id[kMaxLogprobs];
};

// Candidates path: every x >= tau is in cand_*; take the best `num` one at a time. Each thread
// only reads and strikes out its own candidates (c = threadIdx.x + j * kThreads), so the rounds
// need no barrier beyond block_best's own.
__device__ void top_from_candidates(float* cand_value, int* cand_id, int count, int num,
                                    TopList& top) {
  for (int j = 0; j < num; ++j) {
    float best = -INFINITY;
    int best_id = kNoId;
    for (int c = threadIdx.x; c < count; c += kThreads) {
      if (better(cand_value[c], cand_id[c], best, best_id)) {
        best = cand_value[c];
        best_id = cand_id[c];
      }
    }
    const int winner = block_best<kThreads>(best, best_id);
    for (int c = threadIdx.x; c < count; c += kThreads) {
      if (cand_id[c] == winner) {
        top.value[j] = cand_value[c];
        top.id[j] = winner;
        cand_value[c] = -INFINITY;
        cand_id[c] = kNoId;
      }
    }
  }
  __syncthreads();
}

// Exact path for rows where many values tie at the threshold: the num-th largest key by radix
// select; the (fewer than num) values above it in any order, then the tied ones by ascending id
// (a block scan over the row in id order, stopping once enough are found); then one thread
// orders the list.
__device__ void top_by_radix(const float* __restrict__ x, int n, int num, TopList& top) {
  __shared__ int num_above;
  using BlockScan = cub::BlockScan<int, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  const std::uint32_t cut = radix_select<kThreads>(
      [&](int i) {
        return RadixItem{order_key(x[i]), 1.0f};
      },
      n, static_cast<float>(num));
  if (threadIdx.x == 0) num_above = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += kThreads) {
    if (order_key(x[i]) > cut) {
      const int slot = atomicAdd(&num_above, 1);
      if (slot < num) {
        top.value[slot] = x[i];
        top.id[slot] = i;
      }
    }
  }
  __syncthreads();
  const int above = min(num_above, num);
  const int need = num - above;
  int taken = 0;
  for (int base = 0; base < n && taken < need; base += kThreads) {
    const int i = base + static_cast<int>(threadIdx.x);
    const int tied = i < n && order_key(x[i]) == cut ? 1 : 0;
    int before = 0;
    int tile_total = 0;
    BlockScan(scan_storage).ExclusiveSum(tied, before, tile_total);
    if (tied != 0 && taken + before < need) {
      top.value[above + taken + before] = x[i];
      top.id[above + taken + before] = i;
    }
    taken += tile_total;  // the same on every thread
    __syncthreads();      // scan_storage is reused
  }
  if (threadIdx.x == 0) {
    const int total = above + min(taken, need);
    for (int a = 1; a < total; ++a) {  // insertion sort of at most kMaxLogprobs entries
      const float v = top.value[a];
      const int id = top.id[a];
      int b = a - 1;
      for (; b >= 0 && better(v, id, top.value[b], top.id[b]); --b) {
        top.value[b + 1] = top.value[b];
        top.id[b + 1] = top.id[b];
      }
      top.value[b + 1] = v;
      top.id[b + 1] = id;
    }
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) logprobs_kernel(LogprobsParams p) {
  const std::int64_t r = blockIdx.x;
  const RowRecord row = p.rows[r];
  if (row.logprobs_index < 0) return;
  const int n = static_cast<int>(p.vocab_size);
  const std::int32_t token = p.tokens[r];
  if (token < 0 || token >= n) return;
  const float* x = p.logits + r * n;
  const float chosen = x[token];

  // One pass: this thread's max and sum of exp(x - max) (rescaled when the max moves), and how
  // many values beat the chosen one.
  float m = -INFINITY;
  float sum = 0.0f;
  int greater = 0;
  sampling_detail::batched_row_loop<kThreads>(
      n, [&](int i) { return x[i]; },
      [&](int, float v) {
        greater += v > chosen ? 1 : 0;
        if (v > m) {
          sum = sum * expf(m - v) + 1.0f;
          m = v;
        } else if (v > -INFINITY) {
          sum += expf(v - m);
        }
      });
  const float row_max = block_max(m);
  const float total = block_sum(m > -INFINITY ? sum * expf(m - row_max) : 0.0f);
  const int rank = 1 + block_sum_int<kThreads>(greater);
  const double log_z = static_cast<double>(row_max) + log(static_cast<double>(total));

  __shared__ TopList top;
  const int num = min(row.num_logprobs, min(n, kMaxLogprobs));
  if (num > 0) {
    __shared__ float cand_value[kMaxCandidates];
    __shared__ int cand_id[kMaxCandidates];
    __shared__ float thread_max[kThreads];
    __shared__ float shared_tau;
    __shared__ int cand_count;
    thread_max[threadIdx.x] = m;
    if (threadIdx.x == 0) {
      shared_tau = -INFINITY;
      cand_count = 0;
    }
    __syncthreads();
    // The num-th largest thread max: each thread's values are a disjoint group, so at least num
    // values are >= it, and every value of the top num is.
    int above = 0;
    int at_or_above = 0;
    for (int j = 0; j < kThreads; ++j) {
      above += thread_max[j] > m ? 1 : 0;
      at_or_above += thread_max[j] >= m ? 1 : 0;
    }
    if (above < num && at_or_above >= num) shared_tau = m;
    __syncthreads();
    const float tau = shared_tau;
    sampling_detail::batched_row_loop<kThreads>(
        n, [&](int i) { return x[i]; },
        [&](int i, float v) {
          if (v >= tau) {
            const int slot = atomicAdd(&cand_count, 1);
            if (slot < kMaxCandidates) {
              cand_value[slot] = v;
              cand_id[slot] = i;
            }
          }
        });
    __syncthreads();
    const int count = cand_count;
    if (count <= kMaxCandidates) {
      top_from_candidates(cand_value, cand_id, count, num, top);
    } else {
      top_by_radix(x, n, num, top);
    }
  }
  if (threadIdx.x == 0) {
    LogprobsRecord& out = p.out[row.logprobs_index];
    out.logprob = static_cast<float>(static_cast<double>(chosen) - log_z);
    out.rank = rank;
    for (int j = 0; j < num; ++j) {
      out.top_ids[j] = top.id[j];
      out.top_logprobs[j] = static_cast<float>(static_cast<double>(top.value[j]) - log_z);
    }
  }
}

}  // namespace

Status launch_compute_logprobs(const LogprobsParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "compute_logprobs";
  PAGODA_KERNEL_REQUIRE(p.num_rows >= 0 && p.num_rows <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(p.vocab_size > 0 && p.vocab_size < 0x7fffffff, kOp);
  if (p.num_rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(
      p.logits != nullptr && p.rows != nullptr && p.tokens != nullptr && p.out != nullptr, kOp);
  return launch_kernel(logprobs_kernel, static_cast<unsigned>(p.num_rows), kThreads, 0, stream,
                       "logprobs_kernel", p);
}

}  // namespace pagoda::kernels
