#include <cuda_fp8.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/attention/paged_attention.h"
#include "kernels/common/device_types.cuh"

namespace pagoda::kernels {

namespace prefill {

template <typename T, typename C>
Status run_paged_prefill(const PagedAttentionParams&, std::int64_t, cudaStream_t);
#define PAGODA_PREFILL_INSTANCE(T, C)                                                       \
  extern template Status run_paged_prefill<T, C>(const PagedAttentionParams&, std::int64_t, \
                                                 cudaStream_t);
PAGODA_PREFILL_INSTANCE(float, float)
PAGODA_PREFILL_INSTANCE(__half, __half)
PAGODA_PREFILL_INSTANCE(__nv_bfloat16, __nv_bfloat16)
PAGODA_PREFILL_INSTANCE(__half, __nv_fp8_e4m3)
PAGODA_PREFILL_INSTANCE(__nv_bfloat16, __nv_fp8_e4m3)
#undef PAGODA_PREFILL_INSTANCE

}  // namespace prefill

namespace prefill_mma {

template <typename T, typename C>
Status run_paged_prefill_mma(const PagedAttentionParams&, std::int64_t, int, int, cudaStream_t);
#define PAGODA_PREFILL_MMA_INSTANCE(T, C)                                                       \
  extern template Status run_paged_prefill_mma<T, C>(const PagedAttentionParams&, std::int64_t, \
                                                     int, int, cudaStream_t);
PAGODA_PREFILL_MMA_INSTANCE(__half, __half)
PAGODA_PREFILL_MMA_INSTANCE(__nv_bfloat16, __nv_bfloat16)
PAGODA_PREFILL_MMA_INSTANCE(__half, __nv_fp8_e4m3)
PAGODA_PREFILL_MMA_INSTANCE(__nv_bfloat16, __nv_fp8_e4m3)
#undef PAGODA_PREFILL_MMA_INSTANCE

}  // namespace prefill_mma

namespace {

bool aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0;
}

// The tensor-core kernel moves 16-byte chunks of q rows and cache rows with cp.async.
bool mma_applies(const PagedAttentionParams& p) {
  return (p.dtype == cuda::ScalarType::kBF16 || p.dtype == cuda::ScalarType::kF16) &&
         aligned16(p.q) && aligned16(p.out) && aligned16(p.cache.k) && aligned16(p.cache.v) &&
         p.q_row_stride % 8 == 0;
}

}  // namespace

Status launch_paged_prefill_attention(const PagedAttentionParams& p, std::int64_t max_query_len,
                                      cudaStream_t stream) {
  return launch_paged_prefill_attention(p, max_query_len, PrefillKernel::kAuto, stream);
}

Status launch_paged_prefill_attention(const PagedAttentionParams& p, std::int64_t max_query_len,
                                      PrefillKernel kernel, cudaStream_t stream) {
  constexpr const char* kOp = "paged_prefill_attention";
  const PagedKvCache& c = p.cache;
  PAGODA_KERNEL_REQUIRE(p.num_seqs >= 0 && p.num_seqs <= 65535, kOp);  // grid.z
  PAGODA_KERNEL_REQUIRE(c.num_kv_heads > 0 && c.num_kv_heads <= 65535, kOp);
  PAGODA_KERNEL_REQUIRE(p.num_heads > 0 && p.num_heads % c.num_kv_heads == 0, kOp);
  PAGODA_KERNEL_REQUIRE(c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256, kOp);
  PAGODA_KERNEL_REQUIRE(p.sliding_window >= 0 && p.sliding_window <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(c.block_size > 0 && c.num_blocks > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.q_row_stride >= p.num_heads * c.head_dim, kOp);
  PAGODA_KERNEL_REQUIRE(p.softmax_scale > 0.0f, kOp);
  PAGODA_KERNEL_REQUIRE(p.logit_softcap >= 0.0f && std::isfinite(p.logit_softcap), kOp);
  PAGODA_KERNEL_REQUIRE(max_query_len >= 0 && max_query_len <= 0x7fffffff / 64, kOp);
  if (p.num_seqs == 0 || max_query_len == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.q != nullptr && p.out != nullptr && c.k != nullptr && c.v != nullptr,
                        kOp);
  PAGODA_KERNEL_REQUIRE(
      p.query_start_loc != nullptr && p.seq_lens != nullptr && p.block_tables != nullptr, kOp);
  const bool fp8 = c.storage == KvCacheStorage::kFp8E4M3;
  PAGODA_KERNEL_REQUIRE(c.k_scale > 0.0f && c.v_scale > 0.0f, kOp);
  if (kernel == PrefillKernel::kAuto) {
    // head_dim 256 and sliding windows: the CUDA-core kernel until the tensor-core one's
    // 256-wide rows and windows have passed on a GPU (the explicit PrefillKernel::kMma16 takes
    // them). An FP8 cache takes the tensor-core tiles (codes converted in shared memory; passed
    // on the H200, run 27).
    // 32 rows per warp with 64-key tiles (128 x 64) once the prompt is long: 0.427 F against
    // 0.389 F for 32 rows with 32-key tiles and 0.370 F for 16 rows on the G10 shape (H200, run
    // 14; its oracle test passed on hardware in runs 24-25); 16 rows below, where it gives
    // twice the CTAs.
    // A soft-cap at head_dim 128 takes 128 x 32 for long prompts (the 128 x 64 tile has no
    // registers left for it: paged_prefill_mma_kernel.cuh).
    const bool no_keys64 = p.logit_softcap != 0.0f && p.cache.head_dim == 128;
    kernel = !mma_applies(p) || p.cache.head_dim == 256 || p.sliding_window > 0
                 ? PrefillKernel::kReference
             : max_query_len >= 512
                 ? (no_keys64 ? PrefillKernel::kMma32 : PrefillKernel::kMma32Keys64)
                 : PrefillKernel::kMma16;
  }
  if (kernel == PrefillKernel::kReference) {
    return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
      if constexpr (std::is_same_v<T, float>) {
        if (fp8) return unimplemented("paged prefill attention: an FP8 cache needs bf16 or f16");
        return prefill::run_paged_prefill<T, T>(p, max_query_len, stream);
      } else {
        return fp8 ? prefill::run_paged_prefill<T, __nv_fp8_e4m3>(p, max_query_len, stream)
                   : prefill::run_paged_prefill<T, T>(p, max_query_len, stream);
      }
    });
  }

  if (!mma_applies(p)) {
    return unimplemented(
        "paged prefill attention (mma): needs bf16 or f16 and 16-byte aligned q, out and cache");
  }
  if (p.sliding_window > 0 && p.cache.head_dim != 256) {
    return unimplemented(
        "paged prefill attention (mma): sliding windows only at head_dim 256 (the reference "
        "kernel takes the others)");
  }
  const int rows_per_warp = kernel == PrefillKernel::kMma16 ? 16 : 32;
  const int keys_per_tile = kernel == PrefillKernel::kMma32Keys64 ? 64 : 32;
  const auto run = [&]<typename T>() -> Status {
    return fp8 ? prefill_mma::run_paged_prefill_mma<T, __nv_fp8_e4m3>(
                     p, max_query_len, rows_per_warp, keys_per_tile, stream)
               : prefill_mma::run_paged_prefill_mma<T, T>(p, max_query_len, rows_per_warp,
                                                          keys_per_tile, stream);
  };
  return p.dtype == cuda::ScalarType::kBF16 ? run.template operator()<__nv_bfloat16>()
                                            : run.template operator()<__half>();
}

}  // namespace pagoda::kernels
