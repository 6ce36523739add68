// A model file on a device: the executor (CPU or CUDA) sized for the engine's limits, and the
// engine over it. `pagoda serve`, `pagoda bench` and `pagoda generate` open models through here,
// so both devices get the same sizing rules and the same refusals.
//
// KV pool on CUDA (the CPU's rule is in engine_config.h):
//   the executor is built for max_num_seqs sequences and max_num_batched_tokens tokens a step,
//   then profile_num_kv_blocks runs one forward pass at that token budget and reports how many
//   blocks fit in gpu_memory_utilization x device memory, minus what is already held;
//   --kv-cache-memory B given   floor(B / bytes_per_block), refused if more than that count
//   otherwise                   that count
// With a draft model (speculative decoding) its weights load before the target's profiling
// pass, so they count as held; its pool has as many blocks as the target's, so one block of
// the budget costs target + draft bytes, and the draft's CUDA graphs come off the budget too:
//   blocks = (count x target_bytes_per_block - draft graph bytes)
//            / (target_bytes_per_block + draft_bytes_per_block)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/cpu/kv_cache_view.h"
#include "backend/cuda/scalar_type.h"
#include "engine/device.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "model/model_files.h"
#include "pagoda/model_executor.h"
#include "pagoda/status.h"
#include "pagoda/tokenizer.h"
#include "quant/load_time_quantization.h"

namespace pagoda::engine {

/// Where the weights come from (vLLM's --load-format).
enum class LoadFormat : std::uint8_t {
  kAuto,   ///< the model's files
  kDummy,  ///< random weights of the config's shapes (models/llama_weights.h)
};

/// "auto" or "dummy"; INVALID_ARGUMENT naming --load-format otherwise.
StatusOr<LoadFormat> parse_load_format(std::string_view text);

/// The seed of --load-format dummy weights: the same model gets the same weights every run.
inline constexpr std::uint64_t kDummyWeightsSeed = 0;

/// open_model_files for kAuto; for kDummy open_model_config (a config.json file, a folder
/// holding one, or a .gguf file), so no weights need to exist.
StatusOr<ModelFiles> open_model_for(const std::string& path, LoadFormat format);

/// How to run a model on its device.
struct ExecutorOptions {
  Device device = Device::kCpu;
  int num_threads = 0;  ///< CPU: 0 is one per hardware thread.
  /// `--quantization`, quantize unquantized linear weights at load (CUDA: as FP8 or W4A16
  /// layers, with --dtype bf16 or f16).
  quant::LoadTimeQuantization quantization = quant::LoadTimeQuantization::kNone;
  /// CPU: `--kv-cache-dtype` (fp32, or fp16 for half the cache memory). kF32 with
  /// fp8_kv_cache false is `auto` (resolve_kv_cache_dtype).
  cpu::KvDtype kv_cache_dtype = cpu::KvDtype::kF32;
  /// CUDA: `--kv-cache-dtype fp8` (e4m3 codes: half a 16-bit cache's bytes per token).
  bool fp8_kv_cache = false;
  cuda::ScalarType dtype = cuda::ScalarType::kBF16;  ///< CUDA: weights, activations, KV cache.
  double gpu_memory_utilization = 0.9;  ///< CUDA: share of device memory this process may hold.
  LoadFormat load_format = LoadFormat::kAuto;  ///< `--load-format`
  /// CUDA: `--enforce-eager`, no CUDA graphs (every decode step launches kernel by kernel).
  bool enforce_eager = false;
};

/// What start-up took, phase by phase, for the one start-up line of serve and bench.
struct StartupReport {
  /// What the decode CUDA graphs took (CudaModelExecutor::decode_graph_stats).
  struct Graphs {
    int count = 0;
    std::int64_t max_num_seqs = 0;
    double seconds = 0.0;
    std::int64_t bytes = 0;
    bool stopped_by_time_limit = false;
    bool enforce_eager = false;  ///< --enforce-eager: none captured on purpose
  };
  /// (phase, seconds) in the order they ran.
  std::vector<std::pair<std::string, double>> phases;
  /// Set on CUDA: the target's graphs (count 0 with --enforce-eager).
  std::optional<Graphs> graphs;
  /// CUDA: what the target's weights became (OpenedExecutor::description), "cuda, bf16, 128
  /// fp8 linear layers, 8.50 GiB of weights, fp8 kv cache"; empty on the CPU.
  std::string weights;

  void add(std::string phase, double seconds) { phases.emplace_back(std::move(phase), seconds); }
  /// "startup: tokenizer 0.05 s, weights 3.1 s, ..., total 5.3 s".
  std::string summary() const;
  /// "cuda graphs: 35 sizes up to 256 in 0.7 s, 38 MiB" (or "off (--enforce-eager)"); empty
  /// when graphs is unset.
  std::string graphs_summary() const;
};

/// What one step may carry; a CUDA executor sizes its fixed device buffers from it.
struct ExecutorLimits {
  std::int64_t max_num_batched_tokens = 2048;
  std::int64_t max_num_seqs = 256;
  std::int64_t max_model_len = 0;  ///< 0: the model's context length.
  std::int64_t block_size = 16;
};

/// An executor and what its device allows.
struct OpenedExecutor {
  std::unique_ptr<ModelExecutor> executor;
  /// CUDA: the most KV blocks of limits.block_size that fit (the profiling pass); unset on the
  /// CPU, where the engine's memory budget decides.
  std::optional<std::int64_t> max_kv_blocks;
  /// "4 threads" or "cuda, bf16", for speed lines and logs.
  std::string description;
};

/// UNIMPLEMENTED, naming the flags and what to change, for what the CUDA executor cannot run:
/// --quantization or an FP8 KV cache with --dtype f32 (the 4-bit and FP8 kernels take 16-bit
/// activations). OK on the CPU, and for quantized checkpoints (GPTQ, AWQ, act-order included,
/// FP8), which load quantized on CUDA without any flag; --load-format dummy with --quantization
/// quantizes the drawn weights as it would a checkpoint's.
Status check_device_support(const ExecutorOptions& options);

/// `--kv-cache-dtype auto` for a checkpoint whose quantization_config has a kv_cache_scheme
/// (an FP8 cache calibrated by llm-compressor, k_scale / v_scale per layer): on CUDA sets
/// fp8_kv_cache, as vLLM's auto does for a checkpoint that names its KV cache quantization; the
/// CPU, which has no FP8 cache, keeps its own (the scales unused). Unchanged for an explicit
/// --kv-cache-dtype or a checkpoint without the scheme. open_engine and open_executor call it.
Status resolve_kv_cache_dtype(const ModelFiles& files, ExecutorOptions& options);

/// Builds the executor for `files` on options.device (weights loaded, or drawn for
/// --load-format dummy; no KV cache yet).
/// UNAVAILABLE for a CUDA device this build or machine lacks, UNIMPLEMENTED as
/// check_device_support says, INVALID_ARGUMENT for limits the device cannot meet.
StatusOr<OpenedExecutor> open_executor(std::shared_ptr<const ModelFiles> files,
                                       const ExecutorOptions& options,
                                       const ExecutorLimits& limits);

/// How to open a model for the engine.
struct EngineOptions {
  std::string model_path;  ///< A .gguf file or a Hugging Face folder.
  /// The model already opened and its tokenizer already loaded, by a caller that needs them too
  /// (serve's frontend); when null, open_engine opens model_path and loads the tokenizer itself.
  std::shared_ptr<const ModelFiles> files;
  std::shared_ptr<const Tokenizer> tokenizer;
  ExecutorOptions executor;
  EngineConfig engine;
  /// When set, open_engine appends its phases (tokenizer when it loads it, weights, draft
  /// weights, kv profile, kv cache) and on CUDA the graphs.
  StartupReport* startup = nullptr;
};

/// An engine over `options.model_path`; NOT_FOUND / DATA_LOSS for unreadable models,
/// INVALID_ARGUMENT for settings the model or memory budget cannot meet, plus open_executor's
/// errors. The resolved config (engine->config()) says how many KV blocks were chosen.
StatusOr<std::unique_ptr<EngineClient>> open_engine(EngineOptions options);

}  // namespace pagoda::engine
