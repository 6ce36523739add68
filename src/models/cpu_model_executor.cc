#include "models/cpu_model_executor.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "common/mapped_file.h"
#include "models/forward_batch_check.h"
#include "models/interleave_weights.h"
#include "models/kv_cache_groups.h"

namespace pagoda::models {

namespace {

// Where each layer's K and V pools start: a cache line.
constexpr std::int64_t kKvAlignment = 64;

// The weights as the decode kernel reads them best: on the CPUs whose kernels read 16-row panels
// faster for steps of up to max_num_seqs sequences (cpu_interleave_weights), the decoder's
// matrices repacked into them on `pool`.
LlamaWeights for_decode(const ModelFiles& files, LlamaWeights weights, std::int64_t max_num_seqs,
                        cpu::ThreadPool& pool) {
  if (!cpu::cpu_interleave_weights(max_num_seqs)) return weights;
  const auto start = std::chrono::steady_clock::now();
  const InterleaveSummary summary = interleave_for_decode(weights, pool);
  // The file pages of the repacked matrices leave the resident set (a tied embedding's looked-up
  // rows come back on their own), so memory holds one copy of the weights.
  for (const std::span<const std::uint8_t> source : summary.sources) {
    const bool in_file =
        std::any_of(files.tensors.begin(), files.tensors.end(), [&](const ModelTensor& t) {
          const auto at = [](const std::uint8_t* p) { return reinterpret_cast<std::uintptr_t>(p); };
          return at(source.data()) >= at(t.data.data()) &&
                 at(source.data()) + source.size() <= at(t.data.data()) + t.data.size();
        });
    if (in_file) release_mapped_pages(source);
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  std::fprintf(stderr,
               "cpu weights: %d matrices (%.1f MiB) interleaved into 16-row panels in %.2f s "
               "(PAGODA_CPU_INTERLEAVE=0 keeps the file's rows)\n",
               summary.num_matrices, static_cast<double>(summary.bytes) / (1 << 20),
               elapsed.count());
  return weights;
}

}  // namespace

StatusOr<std::unique_ptr<CpuModelExecutor>> CpuModelExecutor::create(
    std::shared_ptr<const ModelFiles> files, const CpuExecutorOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(LlamaWeights weights,
                          load_llama_weights(*files, {.quantization = options.quantization}));
  return finish(std::move(files), std::move(weights), options);
}

StatusOr<std::unique_ptr<CpuModelExecutor>> CpuModelExecutor::create_dummy(
    std::shared_ptr<const ModelFiles> files, const CpuExecutorOptions& options,
    std::uint64_t seed) {
  auto weights = dummy_llama_weights(files->config, seed, options.quantization);
  if (!weights.ok()) {
    return Status(weights.status().code(), files->path + ": " + weights.status().message());
  }
  return finish(std::move(files), std::move(*weights), options);
}

StatusOr<std::unique_ptr<CpuModelExecutor>> CpuModelExecutor::finish(
    std::shared_ptr<const ModelFiles> files, LlamaWeights weights,
    const CpuExecutorOptions& options) {
  const ModelConfig& c = files->config;
  PAGODA_ASSIGN_OR_RETURN(const Architecture* architecture, architecture_of(c));
  if (options.max_num_batched_tokens <= 0) {
    return invalid_argument("max_num_batched_tokens must be positive");
  }
  if (options.max_model_len < 0) return invalid_argument("max_model_len must not be negative");
  ModelExecutorInfo info;
  info.vocab_size = c.vocab_size;
  info.max_model_len =
      options.max_model_len > 0 ? options.max_model_len : c.max_position_embeddings;
  if (info.max_model_len <= 0) {
    return invalid_argument(files->path +
                            ": the model does not say its context length; pass --max-model-len");
  }
  info.max_num_batched_tokens = options.max_num_batched_tokens;
  info.num_layers = c.num_hidden_layers;
  info.num_kv_heads = c.num_key_value_heads;
  info.head_dim = c.head_dim;
  set_kv_cache_groups(*architecture, c, info);
  return std::unique_ptr<CpuModelExecutor>(
      new CpuModelExecutor(std::move(files), *architecture, std::move(weights), info, options));
}

CpuModelExecutor::CpuModelExecutor(std::shared_ptr<const ModelFiles> files,
                                   const Architecture& architecture, LlamaWeights weights,
                                   const ModelExecutorInfo& info, const CpuExecutorOptions& options)
    : files_(std::move(files)),
      architecture_(architecture),
      info_(info),
      pool_(options.num_threads),
      ops_(files_->config, for_decode(*files_, std::move(weights), options.max_num_seqs, pool_),
           info.max_num_batched_tokens),
      kv_dtype_(options.kv_cache_dtype) {}

std::int64_t CpuModelExecutor::kv_cache_bytes_per_block(std::int64_t block_size) const {
  return kv_block_bytes(info_, block_size, cpu::kv_element_bytes(kv_dtype_));
}

Status CpuModelExecutor::allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) {
  std::vector<std::int64_t> own(static_cast<std::size_t>(info_.num_layers));
  for (std::int64_t layer = 0; layer < info_.num_layers; ++layer) own[layer] = layer;
  PAGODA_RETURN_IF_ERROR(allocate_pools(num_blocks, block_size, own));
  shared_pool_ = false;
  return Status::ok_status();
}

Status CpuModelExecutor::allocate_kv_cache_groups(std::int64_t num_blocks,
                                                  std::int64_t block_size) {
  PAGODA_RETURN_IF_ERROR(allocate_pools(num_blocks, block_size, kv_cache_slots(info_)));
  shared_pool_ = info_.num_kv_groups() > 1;
  return Status::ok_status();
}

Status CpuModelExecutor::allocate_pools(std::int64_t num_blocks, std::int64_t block_size,
                                        const std::vector<std::int64_t>& kv_slot) {
  PAGODA_RETURN_IF_ERROR(check_kv_cache_shape(num_blocks, block_size));
  kv_storage_.reset();
  kv_views_.clear();
  num_blocks_ = 0;
  block_size_ = 0;
  const std::int64_t num_slots = *std::max_element(kv_slot.begin(), kv_slot.end()) + 1;
  const std::int64_t bytes_per_pool = num_blocks * block_size * info_.num_kv_heads *
                                      info_.head_dim * cpu::kv_element_bytes(kv_dtype_);
  // 64 spare bytes to start the pools on a cache line (every pool when bytes_per_pool is a
  // multiple of 64): the attention tiles load K/V rows as whole vectors, and rows split across
  // two lines cost decode attention ~20% on AVX-512 (docs/perf/cpu.md, "Session 10").
  kv_storage_.reset(
      new (std::nothrow)
          std::byte[static_cast<std::size_t>(2 * num_slots * bytes_per_pool + kKvAlignment)]);
  if (kv_storage_ == nullptr) {
    return Status(StatusCode::kResourceExhausted,
                  "cannot allocate a KV cache of " + std::to_string(num_blocks) +
                      " blocks; lower --max-model-len or the number of blocks");
  }
  auto* base = reinterpret_cast<std::byte*>(
      (reinterpret_cast<std::uintptr_t>(kv_storage_.get()) + kKvAlignment - 1) &
      ~std::uintptr_t{kKvAlignment - 1});
  for (std::int64_t layer = 0; layer < info_.num_layers; ++layer) {
    cpu::KvCacheView view{.num_blocks = num_blocks,
                          .block_size = block_size,
                          .num_kv_heads = info_.num_kv_heads,
                          .head_dim = info_.head_dim,
                          .dtype = kv_dtype_};
    std::byte* next = base + 2 * kv_slot[static_cast<std::size_t>(layer)] * bytes_per_pool;
    for (bool value : {false, true}) {
      if (kv_dtype_ == cpu::KvDtype::kF16) {
        (value ? view.v_f16 : view.k_f16) = reinterpret_cast<std::uint16_t*>(next);
      } else {
        (value ? view.v : view.k) = reinterpret_cast<float*>(next);
      }
      next += bytes_per_pool;
    }
    kv_views_.push_back(view);
  }
  num_blocks_ = num_blocks;
  block_size_ = block_size;
  group_windows_.assign(info_.kv_group_windows.begin() + 1, info_.kv_group_windows.end());
  return Status::ok_status();
}

Status CpuModelExecutor::forward(const ForwardBatch& batch, float* logits) {
  if (num_blocks_ == 0) {
    return Status(StatusCode::kFailedPrecondition, "forward() before allocate_kv_cache()");
  }
  if (batch.kv_groups.empty() && shared_pool_) {
    return invalid_argument(
        "forward batch: the KV groups share one pool, so the batch must "
        "carry each group's block tables (kv_groups)");
  }
  PAGODA_RETURN_IF_ERROR(
      check_forward_batch(batch, {.vocab_size = info_.vocab_size,
                                  .max_model_len = info_.max_model_len,
                                  .max_num_batched_tokens = info_.max_num_batched_tokens,
                                  .num_blocks = num_blocks_,
                                  .block_size = block_size_,
                                  .group_windows = group_windows_}));
  ops_.bind(pool_, batch, kv_views_, info_.kv_group_of_layer);
  PAGODA_RETURN_IF_ERROR(architecture_.forward(ops_, files_->config));
  ops_.lm_head(logits);
  return Status::ok_status();
}

}  // namespace pagoda::models
