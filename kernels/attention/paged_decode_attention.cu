#include <cuda_fp8.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"

namespace pagoda::kernels {

namespace decode {

template <typename T, typename C>
Status run_paged_decode(const PagedAttentionParams&, const DecodeSplitPlan&, const DecodeWorkspace&,
                        bool pipelined, cudaStream_t);
#define PAGODA_DECODE_INSTANCE(T, C)                                                            \
  extern template Status run_paged_decode<T, C>(const PagedAttentionParams&,                    \
                                                const DecodeSplitPlan&, const DecodeWorkspace&, \
                                                bool, cudaStream_t);
PAGODA_DECODE_INSTANCE(float, float)
PAGODA_DECODE_INSTANCE(__half, __half)
PAGODA_DECODE_INSTANCE(__nv_bfloat16, __nv_bfloat16)
PAGODA_DECODE_INSTANCE(__half, __nv_fp8_e4m3)
PAGODA_DECODE_INSTANCE(__nv_bfloat16, __nv_fp8_e4m3)
#undef PAGODA_DECODE_INSTANCE

}  // namespace decode

namespace decode_mma {

template <typename T, typename C, bool kDirect>
Status run_paged_decode_mma(const PagedAttentionParams&, const DecodeSplitPlan&,
                            const DecodeWorkspace&, cudaStream_t);
#define PAGODA_DECODE_MMA_INSTANCE(T, C, D)             \
  extern template Status run_paged_decode_mma<T, C, D>( \
      const PagedAttentionParams&, const DecodeSplitPlan&, const DecodeWorkspace&, cudaStream_t);
PAGODA_DECODE_MMA_INSTANCE(__half, __half, false)
PAGODA_DECODE_MMA_INSTANCE(__nv_bfloat16, __nv_bfloat16, false)
PAGODA_DECODE_MMA_INSTANCE(__half, __nv_fp8_e4m3, false)
PAGODA_DECODE_MMA_INSTANCE(__nv_bfloat16, __nv_fp8_e4m3, false)
PAGODA_DECODE_MMA_INSTANCE(__half, __nv_fp8_e4m3, true)
PAGODA_DECODE_MMA_INSTANCE(__nv_bfloat16, __nv_fp8_e4m3, true)
#undef PAGODA_DECODE_MMA_INSTANCE

}  // namespace decode_mma

namespace {

constexpr int kMergeThreads = 128;

// One CTA per (sequence, q head): out = sum_j 2^(lse_j - M) o_j / sum_j 2^(lse_j - M) over the
// splits that held keys (lse in log2 units, o_j already normalized within its split). Each
// thread owns 4 dims of one slice of the splits (head_dim / 4 lanes per row, 128 / that slices),
// so a long context's 64 splits are read as 16-byte loads by all 128 threads at once rather
// than one split after another; the slices meet in shared memory.
template <typename T>
__global__ void __launch_bounds__(kMergeThreads)
    merge_splits_kernel(const float* __restrict__ partial_out,
                        const float* __restrict__ partial_lse,
                        const std::int32_t* __restrict__ query_start_loc,
                        const std::int32_t* __restrict__ seq_lens, T* __restrict__ out,
                        int num_heads, int head_dim, int num_splits, int partition_size,
                        const std::int32_t* __restrict__ device_partition_size,
                        const std::int32_t* __restrict__ seq_ids) {
  if (device_partition_size != nullptr) partition_size = *device_partition_size;
  const int row = blockIdx.x;  // the partials' place, as the decode kernel wrote them
  const int seq = seq_ids != nullptr ? seq_ids[row] : row;
  const int head = blockIdx.y;
  const int seq_len = seq_lens[seq];
  const std::int64_t token_row = query_start_loc[seq];
  T* dst = out + (token_row * num_heads + head) * head_dim;
  const int used = min(num_splits, (seq_len + partition_size - 1) / partition_size);
  const std::int64_t first = (static_cast<std::int64_t>(row) * num_heads + head) * num_splits;
  // Launched as a programmatic dependent of the decode kernel (Hopper): the launch and the
  // lines above overlap its tail; the partials are read only after it has completed.
  pdl_wait();
  pdl_launch_dependents();

  __shared__ float warp_max[kMergeThreads / 32];
  float lse_max = -INFINITY;
  for (int j = threadIdx.x; j < used; j += kMergeThreads) {
    lse_max = fmaxf(lse_max, partial_lse[first + j]);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    lse_max = fmaxf(lse_max, __shfl_xor_sync(0xffffffffu, lse_max, offset));
  }
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = lse_max;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kMergeThreads / 32; ++w) lse_max = fmaxf(lse_max, warp_max[w]);

  const int lanes = head_dim / 4;
  const int slices = kMergeThreads / lanes;
  const int slice = threadIdx.x / lanes;
  const int d0 = (threadIdx.x % lanes) * 4;
  float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float weight_sum = 0.0f;
#pragma unroll 4
  for (int j = slice; j < used; j += slices) {
    const float w = exp2f(partial_lse[first + j] - lse_max);
    const float4 x = *reinterpret_cast<const float4*>(partial_out + (first + j) * head_dim + d0);
    weight_sum += w;
    o.x += w * x.x;
    o.y += w * x.y;
    o.z += w * x.z;
    o.w += w * x.w;
  }
  __shared__ float4 slice_o[kMergeThreads];
  __shared__ float slice_w[kMergeThreads];
  slice_o[threadIdx.x] = o;
  slice_w[threadIdx.x] = weight_sum;
  __syncthreads();
  if (slice != 0) return;
  for (int s = 1; s < slices; ++s) {
    const float4 x = slice_o[s * lanes + threadIdx.x];
    weight_sum += slice_w[s * lanes + threadIdx.x];
    o.x += x.x;
    o.y += x.y;
    o.z += x.z;
    o.w += x.w;
  }
  // A zero-length sequence has no split with keys: its output is 0, as in the one-split kernel.
  const float inv = used > 0 ? 1.0f / weight_sum : 0.0f;
  dst[d0 + 0] = from_float<T>(o.x * inv);
  dst[d0 + 1] = from_float<T>(o.y * inv);
  dst[d0 + 2] = from_float<T>(o.z * inv);
  dst[d0 + 3] = from_float<T>(o.w * inv);
}

}  // namespace

DecodeSplitPlan plan_decode_splits(std::int64_t num_seqs, std::int64_t num_kv_heads,
                                   std::int64_t num_heads, std::int64_t max_seq_len, int num_sms,
                                   int max_splits, int min_partition) {
  max_seq_len = std::max<std::int64_t>(max_seq_len, 1);
  const std::int64_t group =
      std::max<std::int64_t>(num_heads / std::max<std::int64_t>(num_kv_heads, 1), 1);
  const std::int64_t ctas = std::max<std::int64_t>(num_seqs * num_kv_heads * ((group + 7) / 8), 1);
  // About one wave of 2 CTAs per SM, never more: gpu_bench's split sweeps on the H200 (runs 28,
  // 29) put the tensor-core kernel, kAuto's over a 16-bit cache, at its best there (b1 16k:
  // 32 splits 0.57 B against 0.50 at 64; b16 4k: 2 splits 0.86 B against 0.76 at 5), and the
  // pipelined one at least as fast as at the 4 per SM planned before (b1 16k: 0.46 against 0.44).
  const std::int64_t sms = std::max(num_sms, 1);
  const std::int64_t wanted = std::max<std::int64_t>(2 * sms / ctas, 1);
  const std::int64_t by_length = max_seq_len / std::max(min_partition, 1);
  const std::int64_t splits =
      std::clamp<std::int64_t>(std::min(wanted, by_length), 1, std::max(max_splits, 1));
  return decode_plan_with_splits(max_seq_len, static_cast<int>(splits));
}

DecodeSplitPlan decode_plan_with_splits(std::int64_t max_seq_len, int num_splits) {
  max_seq_len = std::max<std::int64_t>(max_seq_len, 1);
  const std::int64_t splits = std::max(num_splits, 1);
  std::int64_t partition = (max_seq_len + splits - 1) / splits;
  if (splits > 1) {
    // Whole key tiles per split (the tensor-core kernel's 64): 33 splits of 497 keys become 32
    // of 512.
    partition =
        (partition + kDecodePartitionAlign - 1) / kDecodePartitionAlign * kDecodePartitionAlign;
  }
  DecodeSplitPlan plan;
  plan.num_splits = static_cast<int>((max_seq_len + partition - 1) / partition);
  plan.partition_size = static_cast<int>(partition);
  return plan;
}

std::int64_t decode_workspace_floats(std::int64_t num_seqs, std::int64_t num_heads,
                                     std::int64_t head_dim, const DecodeSplitPlan& plan) {
  return plan.num_splits > 1 ? num_seqs * num_heads * plan.num_splits * head_dim : 0;
}

StatusOr<DecodeKernel> parse_decode_kernel(std::string_view name) {
  if (name.empty() || name == "auto") return DecodeKernel::kAuto;
  if (name == "registers") return DecodeKernel::kRegisters;
  if (name == "pipelined") return DecodeKernel::kPipelined;
  if (name == "tensor-cores") return DecodeKernel::kTensorCores;
  if (name == "tensor-cores-direct") return DecodeKernel::kTensorCoresDirect;
  return invalid_argument(
      "decode attention kernel '" + std::string(name) +
      "' is not one of auto, registers, pipelined, tensor-cores, tensor-cores-direct");
}

namespace {
// PAGODA_DECODE_ATTENTION, read once. A value it does not know fails every kAuto launch with a
// message naming the variable (the executor's first step, at start-up), not silently.
const StatusOr<DecodeKernel>& decode_kernel_environment() {
  static const StatusOr<DecodeKernel> from_env = []() -> StatusOr<DecodeKernel> {
    const char* env = std::getenv("PAGODA_DECODE_ATTENTION");
    StatusOr<DecodeKernel> kernel = parse_decode_kernel(env == nullptr ? "" : env);
    if (!kernel.ok())
      return invalid_argument("PAGODA_DECODE_ATTENTION: " + kernel.status().message());
    return kernel;
  }();
  return from_env;
}

// kAuto: chosen per call. The tensor-core kernel beat the pipelined one at every measured shape
// it runs (run 27, H200: G1 0.74 -> 0.96 B, the 8B step at batch 256 24.8 -> 19.7 ms); the
// pipelined kernel beat the register one everywhere (run 26).
std::atomic<DecodeKernel> g_default_decode_kernel{
    decode_kernel_environment().ok() ? *decode_kernel_environment() : DecodeKernel::kAuto};
}  // namespace

void set_default_decode_kernel(DecodeKernel kernel) {
  g_default_decode_kernel.store(kernel);
}

Status launch_paged_decode_attention(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                                     const DecodeWorkspace& w, cudaStream_t stream) {
  return launch_paged_decode_attention(p, plan, w, DecodeKernel::kAuto, stream);
}

Status launch_paged_decode_attention(const PagedAttentionParams& p, const DecodeSplitPlan& plan,
                                     const DecodeWorkspace& w, DecodeKernel kernel,
                                     cudaStream_t stream) {
  constexpr const char* kOp = "paged_decode_attention";
  const PagedKvCache& c = p.cache;
  PAGODA_KERNEL_REQUIRE(p.num_seqs >= 0 && p.num_seqs <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(c.num_kv_heads > 0 && p.num_heads % c.num_kv_heads == 0, kOp);
  PAGODA_KERNEL_REQUIRE(c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256, kOp);
  PAGODA_KERNEL_REQUIRE(p.sliding_window >= 0 && p.sliding_window <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(c.block_size > 0 && c.num_blocks > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.q_row_stride >= p.num_heads * c.head_dim, kOp);
  PAGODA_KERNEL_REQUIRE(plan.num_splits >= 1 && plan.num_splits <= 65535, kOp);
  PAGODA_KERNEL_REQUIRE(plan.partition_size >= 1 || plan.device_partition_size != nullptr, kOp);
  PAGODA_KERNEL_REQUIRE(p.softmax_scale > 0.0f, kOp);
  PAGODA_KERNEL_REQUIRE(p.logit_softcap >= 0.0f && std::isfinite(p.logit_softcap), kOp);
  PAGODA_KERNEL_REQUIRE(c.k_scale > 0.0f && c.v_scale > 0.0f, kOp);
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
    PAGODA_KERNEL_REQUIRE(is_aligned16(w.partial_out), kOp);  // the merge's float4 loads
    PAGODA_KERNEL_REQUIRE(
        w.capacity_floats >= decode_workspace_floats(p.num_seqs, p.num_heads, c.head_dim, plan),
        kOp);
  }
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    const bool fp8 = c.storage == KvCacheStorage::kFp8E4M3;
    if (kernel == DecodeKernel::kAuto) {
      if (!decode_kernel_environment().ok()) return decode_kernel_environment().status();
      kernel = g_default_decode_kernel.load(std::memory_order_relaxed);
    }
    if (kernel == DecodeKernel::kAuto) {
      // Over an FP8 cache too since run 29 passed it (H200: G1 0.36 B of bytes read against the
      // pipelined kernel's 0.33, the 8B step at b256 1.8% faster).
      const bool tensor_cores_apply =
          !std::is_same_v<T, float> && (c.head_dim == 64 || c.head_dim == 128);
      kernel = tensor_cores_apply ? DecodeKernel::kTensorCores : DecodeKernel::kPipelined;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (kernel == DecodeKernel::kTensorCores || kernel == DecodeKernel::kTensorCoresDirect ||
          fp8) {
        return unimplemented(
            "paged decode attention: the tensor-core kernel and an FP8 cache need bf16 or f16");
      }
      PAGODA_RETURN_IF_ERROR(
          (decode::run_paged_decode<T, T>(p, plan, w, kernel == DecodeKernel::kPipelined, stream)));
    } else {
      if (kernel == DecodeKernel::kTensorCoresDirect && fp8) {
        PAGODA_RETURN_IF_ERROR(
            (decode_mma::run_paged_decode_mma<T, __nv_fp8_e4m3, true>(p, plan, w, stream)));
      } else if (kernel == DecodeKernel::kTensorCores && fp8) {
        PAGODA_RETURN_IF_ERROR(
            (decode_mma::run_paged_decode_mma<T, __nv_fp8_e4m3, false>(p, plan, w, stream)));
      } else if (kernel == DecodeKernel::kTensorCores ||
                 kernel == DecodeKernel::kTensorCoresDirect) {
        // Over a 16-bit cache the tensor-core kernel already reads its tiles as stored.
        PAGODA_RETURN_IF_ERROR((decode_mma::run_paged_decode_mma<T, T, false>(p, plan, w, stream)));
      } else if (fp8) {
        PAGODA_RETURN_IF_ERROR((decode::run_paged_decode<T, __nv_fp8_e4m3>(
            p, plan, w, kernel == DecodeKernel::kPipelined, stream)));
      } else {
        PAGODA_RETURN_IF_ERROR((decode::run_paged_decode<T, T>(
            p, plan, w, kernel == DecodeKernel::kPipelined, stream)));
      }
    }
    if (plan.num_splits == 1) return Status::ok_status();
    // Programmatic dependent launch where the device has it (sm_90+): hides the merge's launch
    // gap behind the decode kernel's tail, which matters when the whole step is ~30 us (G3).
    return launch_pdl(merge_splits_kernel<T>,
                      dim3(static_cast<unsigned>(p.num_seqs), static_cast<unsigned>(p.num_heads)),
                      dim3(kMergeThreads), 0, stream, "merge_splits_kernel", w.partial_out,
                      static_cast<const float*>(w.partial_lse), p.query_start_loc, p.seq_lens,
                      static_cast<T*>(p.out), static_cast<int>(p.num_heads),
                      static_cast<int>(c.head_dim), plan.num_splits, plan.partition_size,
                      plan.device_partition_size, p.decode_seq_ids);
  });
}

}  // namespace pagoda::kernels
