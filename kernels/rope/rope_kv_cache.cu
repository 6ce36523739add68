#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/cuda_status.h"
#include "kernels/common/device_types.cuh"
#include "kernels/common/pdl.cuh"
#include "kernels/rope/rope_kv_cache.h"

namespace pagoda::kernels {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxHalfDim = 256;  // head_dim up to 512
constexpr int kMaxTokensPerCta = 4;
// Work items a thread loads before it computes and stores any: up to 2 x kUnroll 16-byte loads
// in flight per thread, 16 KB per CTA.
constexpr int kUnroll = 4;

// What the kernel reads and writes; the launcher fills it from RopeKvCacheParams. C: the cache's
// element type (T, or __nv_fp8_e4m3 for an FP8 cache).
template <typename T, typename C>
struct RopeArgs {
  T* qkv;                            // [num_tokens, qkv_row_stride]
  std::int64_t qkv_row_stride;       // elements
  const std::int32_t* positions;     // [num_tokens]
  const std::int64_t* slot_mapping;  // [num_tokens]; < 0: padding
  const float* inv_freq;             // [head_dim / 2]
  C* k_cache;                        // [num_blocks, num_kv_heads, block_size, head_dim]
  C* v_cache;                        // same layout
  float k_scale;                     // FP8: the cache holds e4m3(k / k_scale)
  float v_scale;
  std::int64_t block_size;
  int num_tokens;
  int num_heads;
  int num_kv_heads;
  int head_dim;
  int tokens_per_cta;
};

// kVec elements of T: one 16-byte access when they fill 16 bytes, element by element otherwise
// (the fallback for head_dim, strides or pointers that do not allow 16-byte accesses).
template <typename T, int kVec>
struct alignas(kVec * sizeof(T)) Vec {
  T v[kVec];
};

template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> load_vec(const T* p) {
  Vec<T, kVec> x;
  if constexpr (kVec * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(x.v) = *reinterpret_cast<const uint4*>(p);
  } else {
#pragma unroll
    for (int m = 0; m < kVec; ++m) x.v[m] = p[m];
  }
  return x;
}

template <typename T, int kVec>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, kVec>& x) {
  if constexpr (kVec * sizeof(T) == 16) {
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(x.v);
  } else {
#pragma unroll
    for (int m = 0; m < kVec; ++m) p[m] = x.v[m];
  }
}

// kVec cache elements from T values: as they are, or FP8 codes of x / scale (the rotated k,
// already rounded to T, as vLLM quantizes it), one 8- or 4-byte store when aligned.
template <typename T, typename C, int kVec>
__device__ __forceinline__ void store_cache(C* p, const Vec<T, kVec>& x, float scale) {
  if constexpr (std::is_same_v<C, T>) {
    store_vec<T, kVec>(p, x);
  } else {
    Vec<C, kVec> codes;
#pragma unroll
    for (int m = 0; m < kVec; ++m) codes.v[m] = from_float<C>(to_float(x.v[m]) / scale);
    if constexpr (kVec * sizeof(C) == 8) {
      *reinterpret_cast<uint2*>(p) = *reinterpret_cast<const uint2*>(codes.v);
    } else {
#pragma unroll
      for (int m = 0; m < kVec; ++m) p[m] = codes.v[m];
    }
  }
}

// kCount cos or sin values of consecutive pairs; p is 16-byte aligned when kCount % 4 == 0.
template <int kCount>
__device__ __forceinline__ void load_angles(const float* p, float (&out)[kCount]) {
  if constexpr (kCount % 4 == 0) {
#pragma unroll
    for (int q = 0; q < kCount / 4; ++q) {
      const float4 f = reinterpret_cast<const float4*>(p)[q];
      out[4 * q] = f.x;
      out[4 * q + 1] = f.y;
      out[4 * q + 2] = f.z;
      out[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int m = 0; m < kCount; ++m) out[m] = p[m];
  }
}

// Separate roundings, as the CPU reference (and HF) computes them.
template <typename T>
__device__ __forceinline__ void rotate(T& xa, T& xb, float c, float s) {
  const float a = to_float(xa);
  const float b = to_float(xb);
  xa = from_float<T>(__fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)));
  xb = from_float<T>(__fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)));
}

// One CTA per `tokens_per_cta` tokens. Their cos/sin tables and cache row offsets go to shared
// memory before pdl_wait (positions, slot_mapping and inv_freq are step metadata and weights),
// so that work overlaps the previous kernel's tail. Then the tokens' rows are cut into items,
// each one access of kVec elements (two for rotate-half), and the CTA's threads stride over the
// items of all its tokens at once:
//
//   token row:  [ q head 0 .. q head H-1 | k head 0 .. k head KV-1 | v head 0 .. v head KV-1 ]
//   items:      [ rotated: (H + KV) * chunks_per_head            | copied: KV * head_dim / kVec ]
//
//   rotate-half item j of a head: elements [j*kVec, +kVec) paired with [half + j*kVec, +kVec)
//   adjacent-pairs item j:        elements [j*kVec, +kVec) = pairs j*kVec/2 .. +kVec/2
//
// q items store back in place, k items at the token's cache row, v items are copied there; a
// padding token (slot < 0) rotates q and stores nothing in the cache.
template <typename T, typename C, bool kRotateHalf, int kVec>
__global__ void __launch_bounds__(kThreads) rope_kv_cache_kernel(const RopeArgs<T, C> a) {
  static_assert(kRotateHalf || kVec % 2 == 0, "adjacent pairs need whole pairs per item");
  __shared__ __align__(16) float cos_table[kMaxTokensPerCta][kMaxHalfDim];
  __shared__ __align__(16) float sin_table[kMaxTokensPerCta][kMaxHalfDim];
  // Element offset of the token's (block, kv head 0, offset) row in the cache; -1: padding.
  __shared__ std::int64_t cache_row[kMaxTokensPerCta];

  pdl_launch_dependents();
  const int first_token = blockIdx.x * a.tokens_per_cta;
  const int num_local = min(a.tokens_per_cta, a.num_tokens - first_token);
  const int half = a.head_dim / 2;
  for (int e = threadIdx.x; e < num_local * half; e += kThreads) {
    const int local = e / half;
    const int i = e - local * half;
    const auto position = static_cast<float>(a.positions[first_token + local]);
    // Same float product as the CPU reference; sincosf (not __sincosf) keeps full accuracy for
    // large angles. 64 per token at d128, shared by all its q and k heads.
    sincosf(__fmul_rn(position, a.inv_freq[i]), &sin_table[local][i], &cos_table[local][i]);
  }
  if (threadIdx.x < static_cast<unsigned>(num_local)) {
    const std::int64_t slot = a.slot_mapping[first_token + threadIdx.x];
    const std::int64_t block = slot / a.block_size;
    const std::int64_t offset = slot - block * a.block_size;
    cache_row[threadIdx.x] =
        slot >= 0 ? (block * a.num_kv_heads * a.block_size + offset) * a.head_dim : -1;
  }
  __syncthreads();
  pdl_wait();  // qkv is the previous kernel's output

  const int chunks_per_head = (kRotateHalf ? half : a.head_dim) / kVec;
  const int num_rotated = (a.num_heads + a.num_kv_heads) * chunks_per_head;
  const int items_per_token = num_rotated + a.num_kv_heads * a.head_dim / kVec;
  const int num_items = num_local * items_per_token;
  const std::int64_t head_stride = a.block_size * a.head_dim;  // kv heads in a cache block
  const int second = kRotateHalf ? half : 0;                   // offset of the partner access

  constexpr bool kSameType = std::is_same_v<C, T>;
  for (int base = threadIdx.x; base < num_items; base += kThreads * kUnroll) {
    Vec<T, kVec> x[kUnroll], y[kUnroll];
    // Where an item goes: a q item's place in the row, or a k or v item's in the cache. An FP8
    // cache's places (and scales) are kept apart; with a cache of T, dst holds both as before.
    T* dst[kUnroll];
    [[maybe_unused]] C* cache_dst[kSameType ? 1 : kUnroll];
    [[maybe_unused]] float scale[kSameType ? 1 : kUnroll];
    int local[kUnroll];
    int pair0[kUnroll];  // first pair index of the item; -1: a v copy
    const auto has_place = [&](int u) {
      if constexpr (kSameType) {
        return dst[u] != nullptr;
      } else {
        return dst[u] != nullptr || cache_dst[u] != nullptr;
      }
    };
    // Phase 1: every load of the batch in flight before any use.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int item = base + u * kThreads;
      dst[u] = nullptr;
      if constexpr (!kSameType) cache_dst[u] = nullptr;
      local[u] = 0;
      pair0[u] = -1;
      if (item >= num_items) continue;
      local[u] = item / items_per_token;
      const int r = item - local[u] * items_per_token;
      T* row = a.qkv + static_cast<std::int64_t>(first_token + local[u]) * a.qkv_row_stride;
      const std::int64_t cache = cache_row[local[u]];
      if (r < num_rotated) {
        const int head = r / chunks_per_head;  // q heads first, then k heads
        const int j = r - head * chunks_per_head;
        T* src = row + head * a.head_dim + j * kVec;
        pair0[u] = kRotateHalf ? j * kVec : j * (kVec / 2);
        if (head < a.num_heads) {
          dst[u] = src;
        } else if (cache >= 0) {
          C* place = a.k_cache + cache + (head - a.num_heads) * head_stride + j * kVec;
          if constexpr (kSameType) {
            dst[u] = place;
          } else {
            cache_dst[u] = place;
            scale[u] = a.k_scale;
          }
        }
        if (has_place(u)) {  // a padding token's k is not even read
          x[u] = load_vec<T, kVec>(src);
          if constexpr (kRotateHalf) y[u] = load_vec<T, kVec>(src + second);
        }
      } else if (cache >= 0) {
        const int e = (r - num_rotated) * kVec;  // element in the token's v heads
        const int kv_head = e / a.head_dim;
        C* place = a.v_cache + cache + kv_head * head_stride + (e - kv_head * a.head_dim);
        if constexpr (kSameType) {
          dst[u] = place;
        } else {
          cache_dst[u] = place;
          scale[u] = a.v_scale;
        }
        x[u] = load_vec<T, kVec>(row + (a.num_heads + a.num_kv_heads) * a.head_dim + e);
      }
    }
    // Phase 2: rotate and store.
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (!has_place(u)) continue;
      if (pair0[u] >= 0) {
        constexpr int kPairs = kRotateHalf ? kVec : kVec / 2;
        float c[kPairs], s[kPairs];
        load_angles(cos_table[local[u]] + pair0[u], c);
        load_angles(sin_table[local[u]] + pair0[u], s);
        if constexpr (kRotateHalf) {
#pragma unroll
          for (int m = 0; m < kVec; ++m) rotate(x[u].v[m], y[u].v[m], c[m], s[m]);
          if (dst[u] != nullptr) {
            store_vec<T, kVec>(dst[u] + second, y[u]);
          } else if constexpr (!kSameType) {
            store_cache<T, C, kVec>(cache_dst[u] + second, y[u], scale[u]);
          }
        } else {
#pragma unroll
          for (int m = 0; m < kVec / 2; ++m) rotate(x[u].v[2 * m], x[u].v[2 * m + 1], c[m], s[m]);
        }
      }
      if (dst[u] != nullptr) {
        store_vec<T, kVec>(dst[u], x[u]);
      } else if constexpr (!kSameType) {
        store_cache<T, C, kVec>(cache_dst[u], x[u], scale[u]);
      }
    }
  }
}

template <typename T, typename C, bool kRotateHalf>
Status launch_style(const RopeArgs<T, C>& args, bool vector, unsigned grid, cudaStream_t stream) {
  constexpr int kPack = Pack<T>::kSize;
  constexpr int kScalar = kRotateHalf ? 1 : 2;
  auto* kernel = vector ? rope_kv_cache_kernel<T, C, kRotateHalf, kPack>
                        : rope_kv_cache_kernel<T, C, kRotateHalf, kScalar>;
  return launch_pdl(kernel, dim3(grid), dim3(kThreads), 0, stream, "rope_kv_cache_kernel", args);
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
  PAGODA_KERNEL_REQUIRE(
      (p.num_heads + 2 * c.num_kv_heads) * c.head_dim * kMaxTokensPerCta <= 0x7fffffff, kOp);
  if (p.num_tokens == 0) return Status::ok_status();
  PAGODA_KERNEL_REQUIRE(p.qkv != nullptr && p.positions != nullptr && p.slot_mapping != nullptr &&
                            p.inv_freq != nullptr && c.k != nullptr && c.v != nullptr,
                        kOp);
  // Several tokens per CTA only once there are enough CTAs to fill an H100 (132 SMs x 16
  // resident CTAs of 128 threads) about twice: it shares the prologue (positions, slots,
  // sincos, barrier) between tokens; below that, more CTAs hide latency better.
  const int tokens_per_cta =
      static_cast<int>(std::clamp<std::int64_t>(p.num_tokens / 4096, 1, kMaxTokensPerCta));
  const auto grid = static_cast<unsigned>((p.num_tokens + tokens_per_cta - 1) / tokens_per_cta);
  const bool fp8 = c.storage == KvCacheStorage::kFp8E4M3;
  PAGODA_KERNEL_REQUIRE(
      !fp8 || (p.dtype != cuda::ScalarType::kF32 && c.k_scale > 0.0f && c.v_scale > 0.0f), kOp);
  return dispatch_scalar_type(p.dtype, [&]<typename T>() -> Status {
    const auto launch = [&]<typename C>() -> Status {
      const RopeArgs<T, C> args{.qkv = static_cast<T*>(p.qkv),
                                .qkv_row_stride = p.qkv_row_stride,
                                .positions = p.positions,
                                .slot_mapping = p.slot_mapping,
                                .inv_freq = p.inv_freq,
                                .k_cache = static_cast<C*>(c.k),
                                .v_cache = static_cast<C*>(c.v),
                                .k_scale = c.k_scale,
                                .v_scale = c.v_scale,
                                .block_size = c.block_size,
                                .num_tokens = static_cast<int>(p.num_tokens),
                                .num_heads = static_cast<int>(p.num_heads),
                                .num_kv_heads = static_cast<int>(c.num_kv_heads),
                                .head_dim = static_cast<int>(c.head_dim),
                                .tokens_per_cta = tokens_per_cta};
      // 16-byte accesses need every row, head and rotate-half partner on a 16-byte boundary
      // (an FP8 cache's rows and items then sit on 8-byte ones).
      constexpr std::int64_t kPack = Pack<T>::kSize;
      const bool rotate_half = p.style == RopeStyle::kRotateHalf;
      const bool vector = is_aligned16(p.qkv) && is_aligned16(c.k) && is_aligned16(c.v) &&
                          p.qkv_row_stride % kPack == 0 &&
                          (rotate_half ? c.head_dim / 2 : c.head_dim) % kPack == 0;
      return rotate_half ? launch_style<T, C, true>(args, vector, grid, stream)
                         : launch_style<T, C, false>(args, vector, grid, stream);
    };
    if constexpr (std::is_same_v<T, float>) {
      return launch.template operator()<T>();
    } else {
      return fp8 ? launch.template operator()<__nv_fp8_e4m3>() : launch.template operator()<T>();
    }
  });
}

}  // namespace pagoda::kernels
