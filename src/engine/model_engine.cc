#include "engine/model_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "engine/kv_cache_sizing.h"
#include "models/cpu_model_executor.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/model_tokenizer.h"
#if PAGODA_HAVE_CUDA
#include "models/cuda_model_executor.h"
#endif

namespace pagoda::engine {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// An executor with its weights, before any KV cache or profiling.
struct LoadedExecutor {
  std::unique_ptr<ModelExecutor> executor;
#if PAGODA_HAVE_CUDA
  models::CudaModelExecutor* cuda = nullptr;  // the same executor, when it runs on CUDA
#endif
  std::string description;
};

#if PAGODA_HAVE_CUDA
// The prefill attention kernel puts sequences on grid.z.
constexpr std::int64_t kMaxCudaSeqsPerStep = 65535;

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

StatusOr<LoadedExecutor> load_cuda_executor(std::shared_ptr<const ModelFiles> files,
                                            const ExecutorOptions& options,
                                            const ExecutorLimits& limits) {
  if (limits.max_num_seqs > kMaxCudaSeqsPerStep) {
    return invalid_argument("--max-num-seqs " + std::to_string(limits.max_num_seqs) +
                            " is over the CUDA backend's " + std::to_string(kMaxCudaSeqsPerStep) +
                            " sequences per step");
  }
  // Every device buffer that a step indexes (activations, step metadata, split-K workspace) is
  // sized here for the engine's own limits, so no batch the scheduler forms can overflow one.
  const models::CudaExecutorOptions cuda_options{
      .dtype = options.dtype,
      .max_num_batched_tokens = limits.max_num_batched_tokens,
      .max_num_seqs = limits.max_num_seqs,
      .max_model_len = limits.max_model_len,
      .enforce_eager = options.enforce_eager,
      .quantization = options.quantization,
      .kv_cache_storage = options.fp8_kv_cache ? kernels::KvCacheStorage::kFp8E4M3
                                               : kernels::KvCacheStorage::kActivations};
  std::unique_ptr<models::CudaModelExecutor> executor;
  if (options.load_format == LoadFormat::kDummy) {
    auto created =
        models::CudaModelExecutor::create_dummy(files->config, cuda_options, kDummyWeightsSeed);
    if (!created.ok()) {
      return Status(created.status().code(), files->path + ": " + created.status().message());
    }
    executor = std::move(*created);
  } else {
    PAGODA_ASSIGN_OR_RETURN(executor,
                            models::CudaModelExecutor::create(std::move(files), cuda_options));
  }
  LoadedExecutor out;
  out.cuda = executor.get();
  out.description = "cuda, " + std::string(cuda::scalar_type_name(options.dtype)) + ", " +
                    executor->weights_summary() + (options.fp8_kv_cache ? ", fp8 kv cache" : "");
  out.executor = std::move(executor);
  return out;
}

// The GPU pool: everything the profiling pass found room for, or --kv-cache-memory within it,
// shared with the draft model's pool (model_engine.h has the rule).
Status size_gpu_kv_pool(std::int64_t max_blocks, const ModelExecutor& executor,
                        const models::CudaModelExecutor* draft, double gpu_memory_utilization,
                        EngineConfig& config) {
  const std::int64_t block_size = config.cache.block_size;
  const std::int64_t per_block = executor.kv_cache_bytes_per_block(block_size);
  // A draft with sliding layers keeps KV groups too: its blocks are pages of its groups' layers.
  const std::int64_t draft_per_block =
      draft != nullptr ? kv_page_bytes(draft->info(), draft->kv_cache_bytes_per_block(block_size),
                                       config.disable_hybrid_kv_cache_manager)
                       : 0;
  const std::int64_t draft_graphs = draft != nullptr ? draft->graph_memory_reserve() : 0;
  const std::int64_t max_model_len = config.scheduler.max_model_len > 0
                                         ? config.scheduler.max_model_len
                                         : executor.info().max_model_len;
  // With KV groups a block is a page of a few layers (kv_cache_sizing.h), so the same bytes
  // hold more blocks; the draft's pool has as many blocks as the target's.
  KvSizingLimits limits{.block_size = block_size,
                        .max_model_len = max_model_len,
                        .max_num_seqs = config.scheduler.max_num_seqs,
                        .max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                        .extra_bytes_per_block = draft_per_block,
                        .single_group = config.disable_hybrid_kv_cache_manager};
  const std::int64_t available = std::max<std::int64_t>(max_blocks * per_block - draft_graphs, 0);
  std::int64_t budget = available;
  if (config.kv_cache_memory_bytes) {
    if (*config.kv_cache_memory_bytes <= 0) {
      return invalid_argument("--kv-cache-memory must be a positive number of bytes");
    }
    // --kv-cache-memory is the target's pool; the draft's as many blocks come on top.
    limits.extra_bytes_per_block = 0;
    const std::int64_t wanted = *config.kv_cache_memory_bytes;
    const std::int64_t page = kv_page_bytes(executor.info(), per_block, limits.single_group);
    if (wanted / page * (page + draft_per_block) > available) {
      char utilization[16];
      std::snprintf(utilization, sizeof(utilization), "%.2f", gpu_memory_utilization);
      return invalid_argument("--kv-cache-memory " + std::to_string(*config.kv_cache_memory_bytes) +
                              " (and the draft's blocks) is more than the " + gib(available) +
                              " --gpu-memory-utilization " + utilization +
                              " leaves for the KV cache" +
                              (draft != nullptr ? " beside the draft model's" : "") +
                              "; lower it or raise --gpu-memory-utilization");
    }
    budget = *config.kv_cache_memory_bytes;
  }
  size_kv_groups(budget, per_block, executor.info(), limits, config.cache);
  const std::int64_t needed =
      kv_blocks_per_request(config.cache, max_model_len, config.scheduler.max_num_batched_tokens);
  if (config.cache.num_blocks < needed) {
    return invalid_argument("the GPU KV cache holds " + std::to_string(config.cache.num_blocks) +
                            " blocks of " + std::to_string(block_size) + " tokens (" + gib(budget) +
                            ")" + (draft != nullptr ? " beside the draft model's" : "") +
                            ", fewer than the " + std::to_string(needed) +
                            " one request of max_model_len " + std::to_string(max_model_len) +
                            " needs; raise --gpu-memory-utilization or lower --max-model-len");
  }
  return Status::ok_status();
}
#endif

// The executor with its weights on options.device; no profiling, no KV cache.
StatusOr<LoadedExecutor> load_executor(std::shared_ptr<const ModelFiles> files,
                                       const ExecutorOptions& options,
                                       const ExecutorLimits& limits) {
  PAGODA_RETURN_IF_ERROR(check_device_support(options));
  if (options.device == Device::kCuda) {
    // Checked before the weights load, which can take minutes.
    if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
      return invalid_argument("--gpu-memory-utilization must be in (0, 1]");
    }
#if PAGODA_HAVE_CUDA
    if (!cuda_available()) return resolve_device("cuda").status();
    return load_cuda_executor(std::move(files), options, limits);
#else
    return resolve_device("cuda").status();
#endif
  }
  const models::CpuExecutorOptions cpu_options{
      .num_threads = options.num_threads,
      .max_num_batched_tokens = limits.max_num_batched_tokens,
      .max_num_seqs = limits.max_num_seqs,
      .max_model_len = limits.max_model_len,
      .quantization = options.quantization,
      .kv_cache_dtype = options.kv_cache_dtype};
  std::unique_ptr<models::CpuModelExecutor> executor;
  if (options.load_format == LoadFormat::kDummy) {
    PAGODA_ASSIGN_OR_RETURN(executor, models::CpuModelExecutor::create_dummy(
                                          std::move(files), cpu_options, kDummyWeightsSeed));
  } else {
    PAGODA_ASSIGN_OR_RETURN(executor,
                            models::CpuModelExecutor::create(std::move(files), cpu_options));
  }
  LoadedExecutor out;
  out.description = std::to_string(executor->num_threads()) + " threads";  // bench/peer parses it
  out.executor = std::move(executor);
  return out;
}

}  // namespace

StatusOr<LoadFormat> parse_load_format(std::string_view text) {
  if (text == "auto") return LoadFormat::kAuto;
  if (text == "dummy") return LoadFormat::kDummy;
  return invalid_argument("--load-format must be auto or dummy, got \"" + std::string(text) + "\"");
}

StatusOr<ModelFiles> open_model_for(const std::string& path, LoadFormat format) {
  return format == LoadFormat::kDummy ? open_model_config(path) : open_model_files(path);
}

std::string StartupReport::summary() const {
  std::string out = "startup:";
  double total = 0.0;
  char text[96];
  for (const auto& [phase, seconds] : phases) {
    std::snprintf(text, sizeof(text), " %.2f s,", seconds);
    out += " " + phase + text;
    total += seconds;
  }
  std::snprintf(text, sizeof(text), " total %.2f s", total);
  return out + text;
}

std::string StartupReport::graphs_summary() const {
  if (!graphs) return "";
  if (graphs->enforce_eager) return "cuda graphs: off (--enforce-eager)";
  char text[160];
  std::snprintf(text, sizeof(text), "cuda graphs: %d sizes up to %lld in %.2f s, %lld MiB%s",
                graphs->count, static_cast<long long>(graphs->max_num_seqs), graphs->seconds,
                static_cast<long long>(graphs->bytes >> 20),
                graphs->stopped_by_time_limit
                    ? " (capture time limit reached; larger batches run eager)"
                    : "");
  return text;
}

Status check_device_support(const ExecutorOptions& options) {
  if (options.device == Device::kCuda && options.fp8_kv_cache &&
      options.dtype == cuda::ScalarType::kF32) {
    return unimplemented(
        "--kv-cache-dtype fp8 on CUDA needs --dtype bf16 or f16 (its attention kernels read FP8 "
        "codes beside 16-bit activations); drop --dtype f32");
  }
  if (options.device != Device::kCuda ||
      options.quantization == quant::LoadTimeQuantization::kNone) {
    return Status::ok_status();
  }
  // fp8 becomes FP8 W8A8 layers and int4 W4A16 layers, whose kernels take 16-bit activations;
  // an FP32 run would multiply the quantized numbers dense, at FP32's memory.
  const std::string flag =
      "--quantization " + std::string(quant::load_time_quantization_name(options.quantization));
  if (options.dtype == cuda::ScalarType::kF32) {
    return unimplemented(flag + " on CUDA needs --dtype bf16 or f16 (its kernels take 16-bit " +
                         "activations); drop --dtype f32, or add --device cpu");
  }
  return Status::ok_status();
}

Status resolve_kv_cache_dtype(const ModelFiles& files, ExecutorOptions& options) {
  const bool is_auto = !options.fp8_kv_cache && options.kv_cache_dtype == cpu::KvDtype::kF32;
  // The CPU has no FP8 cache: it keeps its own, the scales unused, as vLLM's auto does for
  // every compressed-tensors checkpoint.
  if (!files.quantization.fp8_kv_cache || !is_auto || options.device == Device::kCpu) {
    return Status::ok_status();
  }
  options.fp8_kv_cache = true;
  return Status::ok_status();
}

StatusOr<OpenedExecutor> open_executor(std::shared_ptr<const ModelFiles> files,
                                       const ExecutorOptions& given, const ExecutorLimits& limits) {
  ExecutorOptions options = given;
  PAGODA_RETURN_IF_ERROR(resolve_kv_cache_dtype(*files, options));
  PAGODA_ASSIGN_OR_RETURN(LoadedExecutor loaded, load_executor(std::move(files), options, limits));
  OpenedExecutor out;
#if PAGODA_HAVE_CUDA
  if (loaded.cuda != nullptr) {
    PAGODA_ASSIGN_OR_RETURN(
        out.max_kv_blocks,
        loaded.cuda->profile_num_kv_blocks(options.gpu_memory_utilization, limits.block_size));
  }
#endif
  out.executor = std::move(loaded.executor);
  out.description = std::move(loaded.description);
  return out;
}

StatusOr<std::unique_ptr<EngineClient>> open_engine(EngineOptions options) {
  StartupReport discarded;
  StartupReport& startup = options.startup != nullptr ? *options.startup : discarded;
  auto phase_start = Clock::now();
  const auto end_phase = [&](const char* phase) {
    startup.add(phase, seconds_since(phase_start));
    phase_start = Clock::now();
  };
  std::shared_ptr<const ModelFiles> files = std::move(options.files);
  if (files == nullptr) {
    PAGODA_ASSIGN_OR_RETURN(ModelFiles opened,
                            open_model_for(options.model_path, options.executor.load_format));
    files = std::make_shared<const ModelFiles>(std::move(opened));
  }
  EngineConfig& config = options.engine;
  // Refused before the tokenizer (when not given) and the weights load.
  PAGODA_RETURN_IF_ERROR(resolve_kv_cache_dtype(*files, options.executor));
  PAGODA_RETURN_IF_ERROR(check_device_support(options.executor));
  std::shared_ptr<const Tokenizer> tokenizer = std::move(options.tokenizer);
  if (tokenizer == nullptr) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> loaded, load_model_tokenizer(*files));
    tokenizer = std::move(loaded);
    end_phase("tokenizer");
  }
  // The primary EOS is the tokenizer's; the model's other EOS ids (generation_config) stop too.
  if (!config.eos_token_id) config.eos_token_id = tokenizer->eos_id();
  for (const std::int64_t id : files->config.eos_token_ids) {
    const auto eos = static_cast<std::int32_t>(id);
    auto& extra = config.extra_eos_token_ids;
    if (eos != config.eos_token_id && std::find(extra.begin(), extra.end(), eos) == extra.end()) {
      extra.push_back(eos);
    }
  }
  phase_start = Clock::now();
  PAGODA_ASSIGN_OR_RETURN(
      LoadedExecutor target,
      load_executor(files, options.executor,
                    {.max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                     .max_num_seqs = config.scheduler.max_num_seqs,
                     .max_model_len = config.scheduler.max_model_len,
                     .block_size = config.cache.block_size}));
  end_phase("weights");
#if PAGODA_HAVE_CUDA
  if (target.cuda != nullptr) startup.weights = target.description;
#endif
  LoadedExecutor draft;
  if (config.speculative && config.speculative->method == spec::SpeculativeMethod::kDraftModel) {
    // The draft runs on its own executor and cache, loaded before the target's profiling pass
    // so its weights count as held; its vocabulary is checked against the target's when the
    // speculator is built.
    PAGODA_ASSIGN_OR_RETURN(ModelFiles draft_opened, open_model_for(config.speculative->model,
                                                                    options.executor.load_format));
    ExecutorOptions draft_options = options.executor;
    draft_options.quantization = quant::LoadTimeQuantization::kNone;
    PAGODA_ASSIGN_OR_RETURN(
        draft,
        load_executor(std::make_shared<const ModelFiles>(std::move(draft_opened)), draft_options,
                      {.max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                       .max_num_seqs = config.scheduler.max_num_seqs,
                       .max_model_len = target.executor->info().max_model_len,
                       .block_size = config.cache.block_size}));
    end_phase("draft weights");
  }
#if PAGODA_HAVE_CUDA
  if (target.cuda != nullptr) {
    const double utilization = options.executor.gpu_memory_utilization;
    if (draft.cuda != nullptr) {
      // Claims the draft's activation peak and measures its graphs' memory; the count it
      // returns is the whole budget, which the target's pass below splits instead.
      PAGODA_RETURN_IF_ERROR(
          draft.cuda->profile_num_kv_blocks(utilization, config.cache.block_size).status());
    }
    PAGODA_ASSIGN_OR_RETURN(
        const std::int64_t max_blocks,
        target.cuda->profile_num_kv_blocks(utilization, config.cache.block_size));
    PAGODA_RETURN_IF_ERROR(
        size_gpu_kv_pool(max_blocks, *target.executor, draft.cuda, utilization, config));
    end_phase("kv profile");
  }
  const models::CudaModelExecutor* target_cuda = target.cuda;
#endif
  config.draft_executor = std::move(draft.executor);
  PAGODA_ASSIGN_OR_RETURN(
      std::unique_ptr<EngineClient> client,
      EngineClient::create(std::move(config), std::move(target.executor), std::move(tokenizer)));
#if PAGODA_HAVE_CUDA
  if (target_cuda != nullptr) {
    // The engine owns the executor now; it lives as long as `client`.
    end_phase(options.executor.enforce_eager ? "kv cache" : "kv cache + cuda graphs");
    const models::DecodeGraphStats& g = target_cuda->decode_graph_stats();
    startup.graphs = StartupReport::Graphs{.count = g.count,
                                           .max_num_seqs = g.max_num_seqs,
                                           .seconds = g.capture_seconds,
                                           .bytes = g.device_bytes,
                                           .stopped_by_time_limit = g.stopped_by_time_limit,
                                           .enforce_eager = options.executor.enforce_eager};
    return client;
  }
#endif
  end_phase("kv cache");
  return client;
}

}  // namespace pagoda::engine
