#include <string>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/rope/rope_kv_cache.h"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxHalfDim = 256;  // head_dim up to 512

// One block per token. The token's cos/sin table goes to shared memory once; then each thread
// rotates (head, pair) items of q and k, and copies v elements into the cache.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    rope_kv_cache_kernel(T* __restrict__ qkv, std::int64_t qkv_row_stride,
                         const std::int32_t* __restrict__ positions,
                         const std::int64_t* __restrict__ slot_mapping,
                         const float* __restrict__ inv_freq, T* __restrict__ k_cache,
                         T* __restrict__ v_cache, int num_heads, int num_kv_heads, int head_dim,
                         std::int64_t block_size, bool rotate_half) {
  __shared__ float cos_table[kMaxHalfDim];
  __shared__ float sin_table[kMaxHalfDim];
  const std::int64_t token = blockIdx.x;
  const int half = head_dim / 2;
  const auto position = static_cast<float>(positions[token]);
  for (int i = threadIdx.x; i < half; i += kThreads) {
    // Same float product as the CPU reference; sincosf (not __sincosf) keeps full accuracy for
    // large angles.
    sincosf(__fmul_rn(position, inv_freq[i]), &sin_table[i], &cos_table[i]);
  }
  __syncthreads();

  T* row = qkv + token * qkv_row_stride;
  const std::int64_t slot = slot_mapping[token];
  const std::int64_t block = slot >= 0 ? slot / block_size : 0;
  const std::int64_t offset = slot >= 0 ? slot % block_size : 0;
  // Start of (block, kv_head 0, offset) in the cache; heads are block_size * head_dim apart.
  const std::int64_t cache_base = (block * num_kv_heads * block_size + offset) * head_dim;
  const std::int64_t head_stride = block_size * head_dim;

  const int first_stride = rotate_half ? 1 : 2;
  const int second_offset = rotate_half ? half : 1;
  const int num_items = (num_heads + num_kv_heads) * half;
  for (int item = threadIdx.x; item < num_items; item += kThreads) {
    const int head = item / half;  // q heads first, then k heads
    const int i = item - head * half;
    T* x = row + static_cast<std::int64_t>(head) * head_dim;
    const int ia = i * first_stride;
    const int ib = ia + second_offset;
    const float a = to_float(x[ia]);
    const float b = to_float(x[ib]);
    const float c = cos_table[i];
    const float s = sin_table[i];
    // Separate roundings, as the CPU reference (and HF) computes them.
    const T ra = from_float<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
    const T rb = from_float<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
    if (head < num_heads) {
      x[ia] = ra;
      x[ib] = rb;
    } else if (slot >= 0) {
      T* dst = k_cache + cache_base + (head - num_heads) * head_stride;
      dst[ia] = ra;
      dst[ib] = rb;
    }
  }
  if (slot < 0) return;
  const T* v = row + static_cast<std::int64_t>(num_heads + num_kv_heads) * head_dim;
  for (int e = threadIdx.x; e < num_kv_heads * head_dim; e += kThreads) {
    const int head = e / head_dim;
    const int d = e - head * head_dim;
    v_cache[cache_base + head * head_stride + d] = v[e];
  }
}

}  // namespace

Status launch_rope_kv_cache(const RopeKvCacheParams& p, cudaStream_t stream) {
  constexpr const char* kOp = "rope_kv_cache";
  const PagedKvCache& c = p.cache;
  PAGODA_KERNEL_REQUIRE(p.num_tokens >= 0 && p.num_tokens <= 0x7fffffff, kOp);
  PAGODA_KERNEL_REQUIRE(c.head_dim > 0 && c.head_dim % 2 == 0 && c.head_dim / 2 <= kMaxHalfDim,
                        kOp);
  PAGODA_KERNEL_REQUIRE(p.num_heads > 0 && c.num_kv_heads > 0, kOp);
  PAGODA_KERNEL_REQUIRE(c.num_blocks > 0 && c.block_size > 0, kOp);
  PAGODA_KERNEL_REQUIRE(p.qkv_row_stride >= (p.num_heads + 2 * c.num_kv_heads) * c.head_dim, kOp);
  PAGODA_KERNEL_REQUIRE((p.num_heads + c.num_kv_heads) * c.head_dim <= 0x7fffffff, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.qkv != nullptr && p.positions != nullptr && p.slot_mapping != nullptr &&
                            p.inv_freq != nullptr && c.k != nullptr && c.v != nullptr,
                        kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    rope_kv_cache_kernel<T><<<static_cast<unsigned>(p.num_tokens), kThreads, 0, stream>>>(
        static_cast<T*>(p.qkv), p.qkv_row_stride, p.positions, p.slot_mapping, p.inv_freq,
        static_cast<T*>(c.k), static_cast<T*>(c.v), static_cast<int>(p.num_heads),
        static_cast<int>(c.num_kv_heads), static_cast<int>(c.head_dim), c.block_size,
        p.style == RopeStyle::kRotateHalf);
    return cuda::check_launch("rope_kv_cache_kernel");
  });
}

}  // namespace pagoda::kernels
