// ModelExecutor on the CPU: owns the thread pool, the per-layer KV pools and the activation
// buffers; the model's weights stay in the mapped file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/thread_pool.h"
#include "model/model_files.h"
#include "models/architecture.h"
#include "models/cpu_decoder_ops.h"
#include "pagoda/model_executor.h"
#include "quant/load_time_quantization.h"
#include "sampling/host_sampling_executor.h"

namespace pagoda::models {

/// How to build a CpuModelExecutor.
struct CpuExecutorOptions {
  int num_threads = 0;                         ///< 0: one per hardware thread.
  std::int64_t max_num_batched_tokens = 2048;  ///< Activation buffers hold this many tokens.
  std::int64_t max_num_seqs = 0;               ///< Most sequences in a step; 0: unknown.
  std::int64_t max_model_len = 0;              ///< 0: the model's max_position_embeddings.
  /// `--quantization`: quantize unquantized linear weights at load.
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
  /// Element type of the KV pools. kF16 halves the K/V bytes a decode step reads, but moves
  /// SmolLM2's logprobs up to 3.4e-3 from transformers' (the golden test allows 2e-3), so it is
  /// opt-in (docs/perf/cpu.md).
  cpu::KvDtype kv_cache_dtype = cpu::KvDtype::kF32;
};

/// Runs a model of the architecture registry on the CPU.
class CpuModelExecutor final : public sampling::HostSamplingExecutor {
 public:
  /// Loads and checks the weights of `files`, which the executor keeps alive.
  static StatusOr<std::unique_ptr<CpuModelExecutor>> create(std::shared_ptr<const ModelFiles> files,
                                                            const CpuExecutorOptions& options);
  /// Random weights of `files`' config (--load-format dummy; dummy_llama_weights), its tensors
  /// unused; options.quantization quantizes the decoder layers' linear weights as it would a
  /// checkpoint's.
  static StatusOr<std::unique_ptr<CpuModelExecutor>> create_dummy(
      std::shared_ptr<const ModelFiles> files, const CpuExecutorOptions& options,
      std::uint64_t seed);

  const ModelExecutorInfo& info() const override { return info_; }
  std::int64_t kv_cache_bytes_per_block(std::int64_t block_size) const override;
  Status allocate_kv_cache(std::int64_t num_blocks, std::int64_t block_size) override;
  Status allocate_kv_cache_groups(std::int64_t num_blocks, std::int64_t block_size) override;
  std::int64_t num_kv_blocks() const override { return num_blocks_; }
  std::int64_t kv_block_size() const override { return block_size_; }
  Status forward(const ForwardBatch& batch, float* logits) override;

  /// Threads the pool runs on, the caller included.
  int num_threads() const { return pool_.num_threads(); }

 protected:
  cpu::ThreadPool* sampling_pool() override { return &pool_; }

 private:
  static StatusOr<std::unique_ptr<CpuModelExecutor>> finish(std::shared_ptr<const ModelFiles> files,
                                                            LlamaWeights weights,
                                                            const CpuExecutorOptions& options);
  CpuModelExecutor(std::shared_ptr<const ModelFiles> files, const Architecture& architecture,
                   LlamaWeights weights, const ModelExecutorInfo& info,
                   const CpuExecutorOptions& options);

  std::shared_ptr<const ModelFiles> files_;  // Keeps the mapped weights alive.
  const Architecture& architecture_;
  ModelExecutorInfo info_;
  cpu::ThreadPool pool_;  // Before ops_: the weights are interleaved on it (for_decode).
  CpuDecoderOps ops_;
  cpu::KvDtype kv_dtype_;
  // Every layer's K and V pools in one allocation, uninitialized: a slot is read only after
  // write_kv.
  std::unique_ptr<std::byte[]> kv_storage_;
  std::vector<cpu::KvCacheView> kv_views_;  // [num_layers]
  std::int64_t num_blocks_ = 0;
  std::int64_t block_size_ = 0;
  // The windows of KV groups 1..; with a shared pool (allocate_kv_cache_groups) the layers of
  // different groups share memory slots, so batches must carry kv_groups.
  std::vector<std::int64_t> group_windows_;
  bool shared_pool_ = false;
  // Allocates one K and V pool of num_blocks per entry of slots and points each layer at
  // kv_slot[layer]'s.
  Status allocate_pools(std::int64_t num_blocks, std::int64_t block_size,
                        const std::vector<std::int64_t>& kv_slot);
};

}  // namespace pagoda::models
