#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/launch.cuh"
#include "kernels/sampling/logits_processing.h"

namespace pagoda::kernels {

namespace {

constexpr int kDenseThreads = 256;
constexpr int kDensePerThread = 8;
constexpr int kDenseTile = kDenseThreads * kDensePerThread;  // vocab entries per block
constexpr int kSparseThreads = 256;
constexpr int kCountThreads = 256;

// Stage 4 for one token: repetition on tokens seen in the prompt or the output, then frequency
// and presence on output tokens. Each operation rounds alone (no FMA), as the CPU's do.
__device__ __forceinline__ float penalize(float x, const SlotRecord& slot, bool in_prompt,
                                          int count) {
  if (slot.repetition != 1.0f && (in_prompt || count > 0)) {
    x = x > 0.0f ? __fdiv_rn(x, slot.repetition) : __fmul_rn(x, slot.repetition);
  }
  if (count > 0) {
    x = __fsub_rn(x,
                  __fadd_rn(__fmul_rn(slot.frequency, static_cast<float>(count)), slot.presence));
  }
  return x;
}

__device__ __forceinline__ bool allowed(const std::uint32_t* mask, int v) {
  return mask == nullptr || ((mask[v >> 5] >> (v & 31)) & 1u) != 0u;
}

// grid (vocab tiles, rows): the mask and the penalties of every token of a tile.
__global__ void __launch_bounds__(kDenseThreads) process_dense_kernel(ProcessLogitsParams p) {
  const std::int64_t r = blockIdx.y;
  const RowRecord row = p.rows[r];
  if ((row.flags & kRowProcessed) == 0u) return;
  const SlotRecord slot = p.slots.slots[row.slot];
  const int n = static_cast<int>(p.vocab_size);
  const int words = (n + 31) / 32;
  const float* raw = p.logits + r * n;
  float* out = p.processed + r * n;
  const std::uint32_t* mask =
      row.allowed_mask >= 0 ? p.allowed_masks + static_cast<std::int64_t>(row.allowed_mask) * words
                            : nullptr;
  const std::int32_t* counts =
      slot.penalty_row >= 0 ? p.slots.counts + static_cast<std::int64_t>(slot.penalty_row) * n
                            : nullptr;
  const std::uint32_t* prompt =
      slot.penalty_row >= 0 ? p.slots.prompt + static_cast<std::int64_t>(slot.penalty_row) * words
                            : nullptr;
  const int base = static_cast<int>(blockIdx.x) * kDenseTile + static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kDensePerThread; ++j) {
    const int v = base + j * kDenseThreads;
    if (v >= n) break;
    float x = allowed(mask, v) ? raw[v] : -INFINITY;
    if (counts != nullptr) {
      const bool in_prompt = ((prompt[v >> 5] >> (v & 31)) & 1u) != 0u;
      x = penalize(x, slot, in_prompt, counts[v]);
    }
    out[v] = x;
  }
}

// One block per kRowSparse row: the biased tokens from their raw logits again (mask, + bias,
// penalties: the dense pass wrote them without the bias), then the min_tokens bans.
__global__ void __launch_bounds__(kSparseThreads) process_sparse_kernel(ProcessLogitsParams p) {
  const std::int64_t r = blockIdx.x;
  const RowRecord row = p.rows[r];
  if ((row.flags & kRowSparse) == 0u) return;
  const SlotRecord slot = p.slots.slots[row.slot];
  const int n = static_cast<int>(p.vocab_size);
  const int words = (n + 31) / 32;
  const float* raw = p.logits + r * n;
  float* out = p.processed + r * n;
  const std::uint32_t* mask =
      row.allowed_mask >= 0 ? p.allowed_masks + static_cast<std::int64_t>(row.allowed_mask) * words
                            : nullptr;
  const std::int32_t* counts =
      slot.penalty_row >= 0 ? p.slots.counts + static_cast<std::int64_t>(slot.penalty_row) * n
                            : nullptr;
  const std::uint32_t* prompt =
      slot.penalty_row >= 0 ? p.slots.prompt + static_cast<std::int64_t>(slot.penalty_row) * words
                            : nullptr;
  for (int b = threadIdx.x; b < slot.bias_count; b += kSparseThreads) {
    const int v = p.slots.ids[slot.bias_offset + b];
    float x = allowed(mask, v) ? raw[v] : -INFINITY;
    x = __fadd_rn(x, p.slots.values[slot.bias_offset + b]);
    if (counts != nullptr) {
      const bool in_prompt = ((prompt[v >> 5] >> (v & 31)) & 1u) != 0u;
      x = penalize(x, slot, in_prompt, counts[v]);
    }
    out[v] = x;
  }
  // -inf absorbs the bias and the penalties, so the bans may come last.
  __syncthreads();
  if (row.position < slot.min_tokens) {
    for (int b = threadIdx.x; b < slot.banned_count; b += kSparseThreads) {
      out[p.slots.ids[slot.banned_offset + b]] = -INFINITY;
    }
  }
}

__global__ void count_tokens_kernel(CountTokensParams p) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kCountThreads + threadIdx.x;
  if (r >= p.num_rows) return;
  const RowRecord row = p.rows[r];
  const std::int32_t token = p.tokens[r];
  if ((row.flags & kRowCountToken) == 0u || token < 0 || token >= p.vocab_size) return;
  const std::int32_t penalty_row = p.slots.slots[row.slot].penalty_row;
  if (penalty_row < 0) return;
  atomicAdd(p.slots.counts + static_cast<std::int64_t>(penalty_row) * p.vocab_size + token, 1);
}

__global__ void add_token_counts_kernel(AddTokenCountsParams p) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kCountThreads + threadIdx.x;
  if (i >= p.num_tokens) return;
  const std::int32_t token = p.tokens[i];
  if (token >= 0 && token < p.vocab_size) atomicAdd(p.counts + token, 1);
}

unsigned blocks_for(std::int64_t n, int per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

}  // namespace

Status launch_process_logits(const ProcessLogitsParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "process_logits";
  PAGODA_KERNEL_REQUIRE(p.num_rows >= 0 && p.num_rows <= 65535, kOp);
  PAGODA_KERNEL_REQUIRE(p.vocab_size > 0 && p.vocab_size < 0x7fffffff - kDenseTile, kOp);
  if (p.num_rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.logits != nullptr && p.processed != nullptr && p.rows != nullptr &&
                            p.slots.slots != nullptr,
                        kOp);
  const dim3 dense_grid(blocks_for(p.vocab_size, kDenseTile), static_cast<unsigned>(p.num_rows));
  PAGODA_RETURN_IF_ERROR(launch_kernel(process_dense_kernel, dense_grid, kDenseThreads, 0, stream,
                                       "process_dense_kernel", p));
  return launch_kernel(process_sparse_kernel, static_cast<unsigned>(p.num_rows), kSparseThreads, 0,
                       stream, "process_sparse_kernel", p);
}

Status launch_count_tokens(const CountTokensParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "count_tokens";
  PAGODA_KERNEL_REQUIRE(p.num_rows >= 0 && p.vocab_size > 0, kOp);
  if (p.num_rows == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.rows != nullptr && p.tokens != nullptr && p.slots.slots != nullptr, kOp);
  return launch_kernel(count_tokens_kernel, blocks_for(p.num_rows, kCountThreads), kCountThreads, 0,
                       stream, "count_tokens_kernel", p);
}

Status launch_add_token_counts(const AddTokenCountsParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "add_token_counts";
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.vocab_size > 0, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.counts != nullptr && p.tokens != nullptr, kOp);
  return launch_kernel(add_token_counts_kernel, blocks_for(p.num_tokens, kCountThreads),
                       kCountThreads, 0, stream, "add_token_counts_kernel", p);
}

}  // namespace pagoda::kernels
