#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_types.cuh"

namespace pagoda::kernels {

namespace decode {

template <typename T>
Status run_paged_decode(const PagedAttentionParams&, const DecodeSplitPlan&, const DecodeWorkspace&,
                        cudaStream_t);
extern template Status run_paged_decode<float>(const PagedAttentionParams&, const DecodeSplitPlan&,
                                               const DecodeWorkspace&, cudaStream_t);
extern template Status run_paged_decode<__half>(const PagedAttentionParams&, const DecodeSplitPlan&,
                                                const DecodeWorkspace&, cudaStream_t);
extern template Status run_paged_decode<__nv_bfloat16>(const PagedAttentionParams&,
                                                       const DecodeSplitPlan&,
                                                       const DecodeWorkspace&, cudaStream_t);

}  // namespace decode

namespace {

constexpr int kMergeThreads = 128;

// One CTA per (sequence, q head): out = sum_j 2^(lse_j - M) o_j / sum_j 2^(lse_j - M) over the
// splits that held keys (lse in log2 units, o_j already normalized within its split).
template <typename T>
__global__ void __launch_bounds__(kMergeThreads)
    merge_splits_kernel(const float* __restrict__ partial_out,
                        const float* __restrict__ partial_lse,
                        const std::int32_t* __restrict__ query_start_loc,
                        const std::int32_t* __restrict__ seq_lens, T* __restrict__ out,
                        int num_heads, int head_dim, int num_splits, int partition_size) {
  const int seq = blockIdx.x;
  const int head = blockIdx.y;
  const int seq_len = seq_lens[seq];
  const std::int64_t token_row = query_start_loc[seq];
  T* dst = out + (token_row * num_heads + head) * head_dim;
  const int used = min(num_splits, (seq_len + partition_size - 1) / partition_size);
  const std::int64_t first = (static_cast<std::int64_t>(seq) * num_heads + head) * num_splits;
  float lse_max = -INFINITY;
  for (int j = 0; j < used; ++j) lse_max = fmaxf(lse_max, partial_lse[first + j]);
  for (int d = threadIdx.x; d < head_dim; d += kMergeThreads) {
    float weight_sum = 0.0f;
    float o = 0.0f;
    for (int j = 0; j < used; ++j) {
      const float w = exp2f(partial_lse[first + j] - lse_max);
      weight_sum += w;
      o += w * partial_out[(first + j) * head_dim + d];
    }
    dst[d] = from_float<T>(used > 0 ? o / weight_sum : 0.0f);
  }
}

}  // namespace

DecodeSplitPlan plan_decode_splits(std::int64_t num_seqs, std::int64_t num_kv_heads,
                                   std::int64_t num_heads, std::int64_t max_seq_len, int num_sms,
                                   int max_splits, int min_partition) {
  DecodeSplitPlan plan;
  max_seq_len = std::max<std::int64_t>(max_seq_len, 1);
  const std::int64_t group =
      std::max<std::int64_t>(num_heads / std::max<std::int64_t>(num_kv_heads, 1), 1);
  const std::int64_t ctas = std::max<std::int64_t>(num_seqs * num_kv_heads * ((group + 7) / 8), 1);
  const std::int64_t wanted =
      (2 * static_cast<std::int64_t>(std::max(num_sms, 1)) + ctas - 1) / ctas;
  const std::int64_t by_length = (max_seq_len + min_partition - 1) / std::max(min_partition, 1);
  const std::int64_t splits =
      std::clamp<std::int64_t>(std::min(wanted, by_length), 1, std::max(max_splits, 1));
  plan.num_splits = static_cast<int>(splits);
  plan.partition_size = static_cast<int>((max_seq_len + splits - 1) / splits);
  return plan;
}

std::int64_t decode_workspace_floats(std::int64_t num_seqs, std::int64_t num_heads,
                                     std::int64_t head_dim, const DecodeSplitPlan& plan) {
  return plan.num_splits > 1 ? num_seqs * num_heads * plan.num_splits * head_dim : 0;
}

Status launch_paged_decode_attention(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                                     const DecodeWorkspace& w, cudaStream_t stream) {
  constexpr const char* kOp = "paged_decode_attention";
  const PagedKvCache& c = p.cache;
  PAGODA_KERNEL_REQUIRE(p.num_seqs >= 0 && p.num_seqs <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(c.num_kv_heads > 0 && p.num_heads % c.num_kv_heads == 0, kOp);
  PAGODA_KERNEL_REQUIRE(c.head_dim == 64 || c.head_dim == 128, kOp);
  PAGODA_KERNEL_REQUIRE(c.block_size > 0 && c.num_blocks > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.q_row_stride >= p.num_heads * c.head_dim, kOp);
  PAGODA_KERNEL_REQUIRE(plan.num_splits >= 1 && plan.num_splits <= 65535, kOp);
  PAGODA_KERNEL_REQUIRE(plan.partition_size >= 1, kOp);
  PAGODA_KERNEL_REQUIRE(p.softmax_scale > 0.0f, kOp);
  PAGODA_KERNEL_REQUIRE(p.num_heads <= 65535, kOp);  // bounds grid.y
  if (p.num_seqs == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.q != nullptr && p.out != nullptr && c.k != nullptr && c.v != nullptr,
                        kOp);
  PAGODA_KERNEL_REQUIRE(
      p.query_start_loc != nullptr && p.seq_lens != nullptr && p.block_tables != nullptr, kOp);
  // 16-byte loads of q rows and cache rows.
  PAGODA_KERNEL_REQUIRE(is_aligned16(p.q) && is_aligned16(c.k) && is_aligned16(c.v), kOp);
  PAGODA_KERNEL_REQUIRE(
      p.q_row_stride * static_cast<std::int64_t>(cuda::scalar_type_size(p.dtype)) % 16 == 0, kOp);
  if (plan.num_splits > 1) {
    PAGODA_KERNEL_REQUIRE(w.partial_out != nullptr && w.partial_lse != nullptr, kOp);
    PAGODA_KERNEL_REQUIRE(
        w.capacity_floats >= decode_workspace_floats(p.num_seqs, p.num_heads, c.head_dim, plan),
        kOp);
  }
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    PAGODA_RETURN_IF_ERROR(decode::run_paged_decode<T>(p, plan, w, stream));
    if (plan.num_splits == 1) return Status::ok_status();
    const dim3 grid(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads));
    merge_splits_kernel<T><<<grid, kMergeThreads, 0, stream>>>(
        w.partial_out, w.partial_lse, p.query_start_loc, p.seq_lens, static_cast<T*>(p.out),
        static_cast<int>(p.num_heads), static_cast<int>(c.head_dim), plan.num_splits,
        plan.partition_size);
    return cuda::check_launch("merge_splits_kernel");
  });
}

}  // namespace pagoda::kernels
