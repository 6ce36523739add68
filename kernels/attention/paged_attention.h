// Causal attention of a batch of sequences against the paged KV cache (GQA), on the GPU.
//
// Sequence s owns query rows [query_start_loc[s], query_start_loc[s+1]) and cached tokens
// [0, seq_lens[s]); its q_len queries are its last q_len tokens, so query i sits at position
// seq_len - q_len + i and attends to positions 0..that position (the CPU reference's contract,
// cpu::AttentionBatch). Position p lives in block block_tables[s, p / block_size] at offset
// p % block_size, laid out as PagedKvCache says.
//
// Two kernels:
//   prefill  any q_len (chunked prefill, prefix hits, mixed batches), online softmax. bf16/f16:
//            tensor cores (mma.sync, FA2-style), one CTA per (q head, 64 or 128 queries); the
//            CUDA-core reference kernel (tiles of (query, q head) rows, each KV tile loaded
//            once for the whole GQA group) serves f32 and is what the fast one is tested against.
//   decode   q_len == 1 for every sequence: one CTA per (sequence, KV head, split), all q heads
//            of the group at once, 16-byte loads; splits write partial (o, lse) that a merge
//            kernel combines (flash-decoding).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string_view>

#include "backend/cuda/scalar_type.h"
#include "kernels/common/paged_kv_cache.h"
#include "pagoda/status.h"

namespace pagoda::kernels {

struct PagedAttentionParams {
  const void* q = nullptr;        ///< [num_tokens, q_row_stride]: q head h at column h*head_dim
  std::int64_t q_row_stride = 0;  ///< elements; >= num_heads * head_dim
  void* out = nullptr;            ///< [num_tokens, num_heads, head_dim]
  PagedKvCache cache;             ///< read only here
  const std::int32_t* query_start_loc = nullptr;  ///< [num_seqs + 1], device
  const std::int32_t* seq_lens = nullptr;         ///< [num_seqs], device
  const std::int32_t* block_tables = nullptr;     ///< [num_seqs, max_blocks_per_seq], device
  std::int64_t num_seqs = 0;
  std::int64_t max_blocks_per_seq = 0;
  std::int64_t num_heads = 0;  ///< a multiple of cache.num_kv_heads
  float softmax_scale = 0.0f;  ///< usually 1 / sqrt(head_dim)
  /// 0: every earlier position. Else a sliding window (Gemma 3's local layers): the query at
  /// position p attends to positions max(0, p - sliding_window + 1) .. p only.
  std::int64_t sliding_window = 0;
  /// 0: none. Else the attention logit soft-cap (Gemma 2): each score s = softmax_scale * q.k
  /// becomes logit_softcap * tanh(s / logit_softcap) before the softmax, as on the CPU.
  float logit_softcap = 0.0f;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< q, out and the cache
  /// A mixed step (some sequences decode, some prefill) runs both kernels over one batch:
  /// decode: when set, only these num_seqs sequences (device indices into the batch's arrays;
  /// split partials are laid out by position in this list); prefill: with
  /// skip_single_query, sequences bringing one query are left to the decode kernel.
  const std::int32_t* decode_seq_ids = nullptr;
  bool skip_single_query = false;
};

/// Prefill / mixed batches. `max_query_len` bounds every sequence's q_len (the grid is sized by
/// it; shorter sequences exit early).
Status launch_paged_prefill_attention(const PagedAttentionParams& params,
                                      std::int64_t max_query_len, cudaStream_t stream);

/// Which prefill kernel runs. kAuto: the tensor-core (FA2-style mma.sync) kernel for bf16 and f16
/// when q, out and the cache are 16-byte aligned (q_row_stride a multiple of 8), head_dim is 64
/// or 128 and there is no sliding window, else the CUDA-core reference kernel (always for f32;
/// and, until they have passed on a GPU, for head_dim 256 and sliding windows, which the explicit
/// tensor-core choices take: kMma16 at head_dim 256, windows at head_dim 256 only); an FP8 cache
/// takes the tensor-core tiles too. kMma16 / kMma32: the tensor-core kernel with 16 or 32 query
/// rows per warp (64 or 128 queries per CTA); unimplemented where it does not apply. kMma32Keys64:
/// 32 rows per warp with 64-key tiles at head_dim 128 (FA2's 128 x 64; kMma32 takes 32 keys there;
/// at head_dim 64 both take 64), what kAuto runs for 512+ queries (16 rows below; with a
/// logit_softcap at head_dim 128, kMma32: the 128 x 64 tile there has no soft-cap, its registers
/// being spent). The explicit choices exist for tests and benchmarks.
enum class PrefillKernel { kAuto, kReference, kMma16, kMma32, kMma32Keys64 };
Status launch_paged_prefill_attention(const PagedAttentionParams& params,
                                      std::int64_t max_query_len, PrefillKernel kernel,
                                      cudaStream_t stream);

/// How decode splits each sequence's KV: split j of a sequence covers tokens
/// [j * partition_size, (j + 1) * partition_size); a sequence uses ceil(seq_len / partition_size)
/// of the num_splits CTAs, the rest exit at once (so the grid can stay fixed for CUDA graphs).
///
///   seq_len 1300, partition 512:  | split 0: 0..511 | split 1: 512..1023 | split 2: 1024..1299 |
///                                   partial (o, lse) each -> merge -> out
struct DecodeSplitPlan {
  int num_splits = 1;
  int partition_size = 0;  ///< tokens; num_splits * partition_size >= the longest seq_len
  /// When set, the kernels read the partition size from this device int instead of
  /// partition_size: a CUDA graph keeps its grid of num_splits splits and each replay takes the
  /// step's partition from the step metadata.
  const std::int32_t* device_partition_size = nullptr;
};

/// Split partitions are whole multiples of this many keys.
inline constexpr std::int64_t kDecodePartitionAlign = 64;

/// At most `num_splits` splits over `max_seq_len` keys: partitions of ceil(len / splits) keys,
/// rounded up to whole kDecodePartitionAlign keys when split, and only as many splits as those
/// partitions need (every split holds keys).
DecodeSplitPlan decode_plan_with_splits(std::int64_t max_seq_len, int num_splits);

/// Picks splits so that num_seqs * kv-head CTAs * splits fills at most one wave of 2 CTAs per SM
/// (none when the unsplit CTAs already fill half of it), with at least `min_partition` tokens per
/// split, at most `max_splits`, and partitions of whole kDecodePartitionAlign keys.
DecodeSplitPlan plan_decode_splits(std::int64_t num_seqs, std::int64_t num_kv_heads,
                                   std::int64_t num_heads, std::int64_t max_seq_len, int num_sms,
                                   int max_splits, int min_partition = 256);

/// fp32 scratch for the split partials; unused when num_splits == 1.
struct DecodeWorkspace {
  float* partial_out = nullptr;      ///< [num_seqs, num_heads, num_splits, head_dim]
  float* partial_lse = nullptr;      ///< [num_seqs, num_heads, num_splits], log2 domain
  std::int64_t capacity_floats = 0;  ///< size of partial_out; partial_lse holds 1/head_dim of it
};

/// Floats partial_out needs for this shape and plan.
std::int64_t decode_workspace_floats(std::int64_t num_seqs, std::int64_t num_heads,
                                     std::int64_t head_dim, const DecodeSplitPlan& plan);

/// Decode: every sequence has exactly one query (query_start_loc[s+1] - query_start_loc[s] ==
/// 1; the caller knows this from the batch it built). head_dim 64, 128 or 256. With a sliding
/// window, splits wholly before the window write an empty partial (lse -inf) that the merge
/// weighs 0.
Status launch_paged_decode_attention(const PagedAttentionParams& params,
                                     const DecodeSplitPlan& plan, const DecodeWorkspace& workspace,
                                     cudaStream_t stream);

/// Which decode kernel runs (paged_decode_kernel.cuh). kPipelined: the K/V rows go through a
/// ring of 3 tiles in shared memory by cp.async, two tiles ahead of the math. kRegisters: each
/// thread loads a tile's rows into registers, all loads before any use; the same arithmetic (the
/// tests hold the two to the same bits), slower on every measured shape. kTensorCores
/// (paged_decode_mma_kernel.cuh; bf16/f16, head_dim 64 or 128, a 16-bit or FP8 cache): the
/// group's q heads as the rows of mma.sync tiles, each warp streaming its own 16-key tiles
/// through a cp.async ring; P is rounded to the dtype before P V, as in the tensor-core prefill;
/// unimplemented where it does not apply. kAuto: the process default, which is the tensor-core
/// kernel where it applies and the pipelined one elsewhere (f32, head_dim 256), unless
/// set_default_decode_kernel or
/// PAGODA_DECODE_ATTENTION (registers, pipelined, tensor-cores or auto; read once, like vLLM's
/// VLLM_ATTENTION_BACKEND) names one kernel. The explicit choices exist for tests and benchmarks.
/// kTensorCoresDirect (tensor-cores-direct): over an FP8 cache, the tensor-core kernel with its
/// B fragments built from the codes in registers and an f16 mma instead of converted tiles in
/// shared memory (session 23, written without a GPU: not kAuto's until measured); over a 16-bit
/// cache it is kTensorCores.
enum class DecodeKernel { kAuto, kRegisters, kPipelined, kTensorCores, kTensorCoresDirect };
Status launch_paged_decode_attention(const PagedAttentionParams& params,
                                     const DecodeSplitPlan& plan, const DecodeWorkspace& workspace,
                                     DecodeKernel kernel, cudaStream_t stream);
/// "auto", "registers", "pipelined", "tensor-cores" or "tensor-cores-direct"
/// (PAGODA_DECODE_ATTENTION's values; empty is auto); anything else is invalid_argument.
StatusOr<DecodeKernel> parse_decode_kernel(std::string_view name);
/// What kAuto runs from now on in this process (benchmarks compare whole models with each; a
/// captured CUDA graph keeps the kernel it was captured with). kAuto restores the per-call
/// choice above, not PAGODA_DECODE_ATTENTION.
void set_default_decode_kernel(DecodeKernel kernel);

}  // namespace pagoda::kernels
