#include "engine/model_engine.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "models/cpu_model_executor.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/model_tokenizer.h"
#if PAGODA_HAVE_CUDA
#include "models/cuda_model_executor.h"
#endif

namespace pagoda::engine {

namespace {

#if PAGODA_HAVE_CUDA
// The prefill attention kernel puts sequences on grid.z.
constexpr std::int64_t kMaxCudaSeqsPerStep = 65535;

std::string gib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

StatusOr<OpenedExecutor> open_cuda_executor(std::shared_ptr<const ModelFiles> files,
                                            const ExecutorOptions& options,
                                            const ExecutorLimits& limits) {
  if (limits.max_num_seqs > kMaxCudaSeqsPerStep) {
    return invalid_argument("--max-num-seqs " + std::to_string(limits.max_num_seqs) +
                            " is over the CUDA backend's " + std::to_string(kMaxCudaSeqsPerStep) +
                            " sequences per step");
  }
  // Every device buffer that a step indexes (activations, step metadata, split-K workspace) is
  // sized here for the engine's own limits, so no batch the scheduler forms can overflow one.
  PAGODA_ASSIGN_OR_RETURN(
      std::unique_ptr<models::CudaModelExecutor> executor,
      models::CudaModelExecutor::create(std::move(files),
                                        {.dtype = options.dtype,
                                         .max_num_batched_tokens = limits.max_num_batched_tokens,
                                         .max_num_seqs = limits.max_num_seqs,
                                         .max_model_len = limits.max_model_len}));
  OpenedExecutor out;
  PAGODA_ASSIGN_OR_RETURN(
      out.max_kv_blocks,
      executor->profile_num_kv_blocks(options.gpu_memory_utilization, limits.block_size));
  out.description = "cuda, " + std::string(cuda::scalar_type_name(options.dtype));
  out.executor = std::move(executor);
  return out;
}

// The GPU pool: everything the profiling pass found room for, or --kv-cache-memory within it.
Status size_gpu_kv_pool(std::int64_t max_blocks, const ModelExecutor& executor,
                        double gpu_memory_utilization, EngineConfig& config) {
  const std::int64_t block_size = config.cache.block_size;
  const std::int64_t per_block = executor.kv_cache_bytes_per_block(block_size);
  std::int64_t blocks = max_blocks;
  if (config.kv_cache_memory_bytes) {
    if (*config.kv_cache_memory_bytes <= 0) {
      return invalid_argument("--kv-cache-memory must be a positive number of bytes");
    }
    blocks = *config.kv_cache_memory_bytes / per_block;
    if (blocks > max_blocks) {
      char utilization[16];
      std::snprintf(utilization, sizeof(utilization), "%.2f", gpu_memory_utilization);
      return invalid_argument("--kv-cache-memory " + std::to_string(*config.kv_cache_memory_bytes) +
                              " is more than the " + gib(max_blocks * per_block) +
                              " --gpu-memory-utilization " + utilization +
                              " leaves for the KV cache; lower it or raise "
                              "--gpu-memory-utilization");
    }
  }
  const std::int64_t max_model_len = config.scheduler.max_model_len > 0
                                         ? config.scheduler.max_model_len
                                         : executor.info().max_model_len;
  if (blocks * block_size < max_model_len) {
    return invalid_argument("the GPU KV cache holds " + std::to_string(blocks * block_size) +
                            " tokens (" + gib(blocks * per_block) + "), fewer than max_model_len " +
                            std::to_string(max_model_len) +
                            "; raise --gpu-memory-utilization or lower --max-model-len");
  }
  config.cache.num_blocks = blocks;
  return Status::ok_status();
}
#endif

}  // namespace

Status check_device_support(Device device, const ModelFiles& files,
                            quant::LoadTimeQuantization quantization, bool speculative) {
  if (device != Device::kCuda) return Status::ok_status();
  // The CUDA executor dequantizes weights into --dtype at upload; it has no load-time
  // quantization, no act-order input permutation and no speculative step yet.
  if (quantization != quant::LoadTimeQuantization::kNone) {
    return unimplemented("--quantization " +
                         std::string(quant::load_time_quantization_name(quantization)) +
                         " runs on the CPU only so far; add --device cpu");
  }
  if (files.quantization.desc_act) {
    return unimplemented(files.path +
                         ": act-order GPTQ (desc_act) runs on the CPU only so far; add --device "
                         "cpu");
  }
  if (speculative) {
    return unimplemented(
        "--speculative-config runs on the CPU engine only so far; add --device cpu");
  }
  return Status::ok_status();
}

StatusOr<OpenedExecutor> open_executor(std::shared_ptr<const ModelFiles> files,
                                       const ExecutorOptions& options,
                                       const ExecutorLimits& limits) {
  PAGODA_RETURN_IF_ERROR(
      check_device_support(options.device, *files, options.quantization, /*speculative=*/false));
  if (options.device == Device::kCuda) {
    // Checked before the weights load, which can take minutes.
    if (!(options.gpu_memory_utilization > 0.0 && options.gpu_memory_utilization <= 1.0)) {
      return invalid_argument("--gpu-memory-utilization must be in (0, 1]");
    }
#if PAGODA_HAVE_CUDA
    if (!cuda_available()) return resolve_device("cuda").status();
    return open_cuda_executor(std::move(files), options, limits);
#else
    return resolve_device("cuda").status();
#endif
  }
  PAGODA_ASSIGN_OR_RETURN(
      std::unique_ptr<models::CpuModelExecutor> executor,
      models::CpuModelExecutor::create(std::move(files),
                                       {.num_threads = options.num_threads,
                                        .max_num_batched_tokens = limits.max_num_batched_tokens,
                                        .max_model_len = limits.max_model_len,
                                        .quantization = options.quantization,
                                        .kv_cache_dtype = options.kv_cache_dtype}));
  OpenedExecutor out;
  out.description = std::to_string(executor->num_threads()) + " threads";  // bench/peer parses it
  out.executor = std::move(executor);
  return out;
}

StatusOr<std::unique_ptr<EngineClient>> open_engine(EngineOptions options) {
  std::shared_ptr<const ModelFiles> files = std::move(options.files);
  if (files == nullptr) {
    PAGODA_ASSIGN_OR_RETURN(ModelFiles opened, open_model_files(options.model_path));
    files = std::make_shared<const ModelFiles>(std::move(opened));
  }
  EngineConfig& config = options.engine;
  // Refused before the tokenizer (when not given) and the weights load.
  PAGODA_RETURN_IF_ERROR(check_device_support(options.executor.device, *files,
                                              options.executor.quantization,
                                              config.speculative.has_value()));
  std::shared_ptr<const Tokenizer> tokenizer = std::move(options.tokenizer);
  if (tokenizer == nullptr) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> loaded, load_model_tokenizer(*files));
    tokenizer = std::move(loaded);
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
  PAGODA_ASSIGN_OR_RETURN(
      OpenedExecutor target,
      open_executor(files, options.executor,
                    {.max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                     .max_num_seqs = config.scheduler.max_num_seqs,
                     .max_model_len = config.scheduler.max_model_len,
                     .block_size = config.cache.block_size}));
#if PAGODA_HAVE_CUDA
  if (target.max_kv_blocks) {
    PAGODA_RETURN_IF_ERROR(size_gpu_kv_pool(*target.max_kv_blocks, *target.executor,
                                            options.executor.gpu_memory_utilization, config));
  }
#endif
  if (config.speculative && config.speculative->method == spec::SpeculativeMethod::kDraftModel) {
    // The draft runs on its own executor and cache; its vocabulary is checked against the
    // target's when the speculator is built.
    PAGODA_ASSIGN_OR_RETURN(ModelFiles draft_opened, open_model_files(config.speculative->model));
    ExecutorOptions draft_options = options.executor;
    draft_options.quantization = quant::LoadTimeQuantization::kNone;
    PAGODA_ASSIGN_OR_RETURN(
        OpenedExecutor draft,
        open_executor(std::make_shared<const ModelFiles>(std::move(draft_opened)), draft_options,
                      {.max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                       .max_num_seqs = config.scheduler.max_num_seqs,
                       .max_model_len = target.executor->info().max_model_len,
                       .block_size = config.cache.block_size}));
    config.draft_executor = std::move(draft.executor);
  }
  return EngineClient::create(std::move(config), std::move(target.executor), std::move(tokenizer));
}

}  // namespace pagoda::engine
