#include "engine/cpu_engine.h"

#include <algorithm>
#include <utility>

#include "model/model_files.h"
#include "models/cpu_model_executor.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda::engine {

namespace {

StatusOr<std::unique_ptr<Tokenizer>> load_tokenizer(const ModelFiles& files) {
  if (files.format == ModelFormat::kGguf) return load_tokenizer_from_gguf(*files.gguf);
  if (files.tokenizer_json_path.empty()) {
    return not_found(files.path + ": no tokenizer.json in the model folder");
  }
  return load_tokenizer_json(files.tokenizer_json_path, files.tokenizer_config_path);
}

}  // namespace

StatusOr<std::unique_ptr<EngineClient>> open_cpu_engine(CpuEngineOptions options) {
  PAGODA_ASSIGN_OR_RETURN(ModelFiles opened, open_model_files(options.model_path));
  auto files = std::make_shared<const ModelFiles>(std::move(opened));
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, load_tokenizer(*files));
  EngineConfig& config = options.engine;
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
      std::unique_ptr<models::CpuModelExecutor> executor,
      models::CpuModelExecutor::create(
          files, {.num_threads = options.num_threads,
                  .max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                  .max_model_len = config.scheduler.max_model_len,
                  .quantization = options.quantization}));
  if (config.speculative && config.speculative->method == spec::SpeculativeMethod::kDraftModel) {
    // The draft runs on its own executor and cache; its vocabulary is checked against the
    // target's when the speculator is built.
    PAGODA_ASSIGN_OR_RETURN(ModelFiles draft_opened, open_model_files(config.speculative->model));
    PAGODA_ASSIGN_OR_RETURN(config.draft_executor,
                            models::CpuModelExecutor::create(
                                std::make_shared<const ModelFiles>(std::move(draft_opened)),
                                {.num_threads = options.num_threads,
                                 .max_num_batched_tokens = config.scheduler.max_num_batched_tokens,
                                 .max_model_len = executor->info().max_model_len}));
  }
  return EngineClient::create(std::move(config), std::move(executor), std::move(tokenizer));
}

}  // namespace pagoda::engine
