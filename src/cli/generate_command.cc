#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <vector>

#include "cli/commands.h"
#include "cli/model_assets.h"
#include "engine/model_engine.h"
#include "models/single_sequence_batcher.h"
#include "pagoda/sampling_params.h"
#include "pagoda/step_sampling.h"
#include "sampling/sampling_rows.h"

namespace pagoda::cli {

namespace {

using Clock = std::chrono::steady_clock;

// Prompts longer than this are prefilled in chunks, which bounds the activation buffers.
constexpr std::int64_t kMaxPrefillChunk = 512;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Flags override the model's generation_config.json, which overrides vLLM's neutral defaults
// (temperature 1, top_p 1, top_k and min_p off), the way vLLM's --generation-config auto does.
SamplingParams sampling_params(const GenerateCommand& cmd, const GenerationDefaults& model) {
  SamplingParams params;
  if (model.temperature) params.temperature = *model.temperature;
  if (model.top_p) params.top_p = *model.top_p;
  if (model.top_k) params.top_k = *model.top_k;
  if (model.min_p) params.min_p = *model.min_p;
  if (model.do_sample && !*model.do_sample) params.temperature = 0.0;
  if (cmd.temperature) params.temperature = *cmd.temperature;
  if (cmd.top_p) params.top_p = *cmd.top_p;
  if (cmd.top_k) params.top_k = *cmd.top_k;
  if (cmd.min_p) params.min_p = *cmd.min_p;
  params.seed = cmd.seed;
  return params;
}

// `files`: where the chat template comes from (the model's, or --tokenizer's).
StatusOr<std::vector<std::int32_t>> prompt_ids(const GenerateCommand& cmd, const ModelFiles& files,
                                               const Tokenizer& tokenizer) {
  if (cmd.chat.empty()) return tokenizer.encode(cmd.prompt);
  PAGODA_ASSIGN_OR_RETURN(ChatTemplate chat_template,
                          load_model_chat_template(files, cmd.chat_template_path));
  ChatTemplateInputs inputs;
  if (!cmd.system.empty()) inputs.messages.push_back({{"role", "system"}, {"content", cmd.system}});
  inputs.messages.push_back({{"role", "user"}, {"content", cmd.chat}});
  inputs.add_generation_prompt = true;
  if (auto bos = tokenizer.bos_id()) inputs.bos_token = tokenizer.token_to_piece(*bos).value_or("");
  if (auto eos = tokenizer.eos_id()) inputs.eos_token = tokenizer.token_to_piece(*eos).value_or("");
  PAGODA_ASSIGN_OR_RETURN(std::string text, chat_template.render(inputs));
  // The template writes any BOS itself.
  return tokenizer.encode(text, {.add_special_tokens = false, .parse_special = true});
}

std::vector<std::int32_t> stop_ids(const ModelFiles& files, const Tokenizer& tokenizer) {
  std::vector<std::int32_t> ids;
  for (std::int64_t id : files.config.eos_token_ids) ids.push_back(static_cast<std::int32_t>(id));
  if (auto eos = tokenizer.eos_id()) ids.push_back(*eos);
  return ids;
}

// The executor --device asks for, built for one sequence prefilled in chunks of
// `max_num_batched_tokens`.
StatusOr<engine::OpenedExecutor> make_executor(const GenerateCommand& cmd,
                                               std::shared_ptr<const ModelFiles> files,
                                               std::int64_t max_num_batched_tokens) {
  engine::ExecutorOptions options{.num_threads = cmd.threads};
  PAGODA_RETURN_IF_ERROR(cmd.device.apply(cmd.quantization, options));
  PAGODA_RETURN_IF_ERROR(cmd.load.apply(options));
  return engine::open_executor(std::move(files), options,
                               {.max_num_batched_tokens = max_num_batched_tokens,
                                .max_num_seqs = 1,
                                .max_model_len = cmd.max_model_len,
                                .block_size = cmd.block_size});
}

// With --speculative-config the sequence runs through the engine, which owns speculative
// decoding; the text streams the same way and stderr gets the same speed lines plus the drafts.
int generate_with_engine(const GenerateCommand& cmd, const LoadedModel& model,
                         std::vector<std::int32_t> ids, const SamplingParams& params) {
  engine::EngineOptions options;
  options.model_path = model.files->path;
  options.files = model.files;
  options.tokenizer = model.tokenizer;
  options.executor.num_threads = cmd.threads;
  if (Status s = cmd.device.apply(cmd.quantization, options.executor); !s.ok()) {
    return report_error(s);
  }
  if (Status s = cmd.load.apply(options.executor); !s.ok()) return report_error(s);
  options.engine.scheduler.max_model_len = cmd.max_model_len;
  options.engine.scheduler.max_num_seqs = 1;
  options.engine.cache.block_size = cmd.block_size;
  options.engine.disable_hybrid_kv_cache_manager = cmd.disable_hybrid_kv_cache_manager;
  if (Status s = cmd.speculative.apply(options.engine); !s.ok()) return report_error(s);
  auto client = engine::open_engine(std::move(options));
  if (!client.ok()) return report_error(client.status());
  const auto num_prompt = static_cast<std::int64_t>(ids.size());
  engine::EngineRequest request;
  request.prompt_token_ids = std::move(ids);
  request.sampling = params;
  request.max_tokens = std::min<std::int64_t>(
      cmd.max_tokens, (*client)->config().scheduler.max_model_len - num_prompt);
  request.ignore_eos = cmd.ignore_eos;
  auto stream = (*client)->submit(std::move(request));
  if (!stream.ok()) return report_error(stream.status());
  engine::RequestOutput final_output;
  while (true) {
    auto item = (*stream)->next();
    if (!item.ok()) break;
    if (!item->error.ok()) return report_error(item->error);
    std::cout << item->output.text << std::flush;
    if (item->output.finished) final_output = std::move(item->output);
  }
  std::cout << "\n" << std::flush;
  const engine::RequestTimings& t = final_output.timings;
  const std::int64_t generated = final_output.usage.num_completion_tokens;
  const double ttft = t.time_to_first_token().value_or(0.0);
  const double decode_seconds = t.finished_time.value_or(0.0) - t.first_token_time.value_or(0.0);
  const engine::SpecDecodeStats spec = (*client)->stats().spec_decode;
  std::fprintf(stderr,
               "prompt tokens: %lld, prefill: %.1f tokens/s\n"
               "generated tokens: %lld, decode: %.1f tokens/s (engine, %s)\n"
               "speculation: %lld verifications, %lld draft tokens, %lld accepted\n",
               static_cast<long long>(num_prompt), ttft > 0 ? num_prompt / ttft : 0.0,
               static_cast<long long>(generated),
               generated > 1 && decode_seconds > 0 ? (generated - 1) / decode_seconds : 0.0,
               cmd.speculative.json.c_str(), static_cast<long long>(spec.num_drafts),
               static_cast<long long>(spec.num_draft_tokens),
               static_cast<long long>(spec.num_accepted_tokens));
  return 0;
}

}  // namespace

CLI::App* GenerateCommand::add_to(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt (GPU or CPU)");
  sub->add_option("model", model,
                  "A .gguf file or a Hugging Face model folder (default model); with "
                  "--load-format dummy also a config.json file");
  auto* prompt_option = sub->add_option("--prompt", prompt, "Raw prompt text (BOS added)");
  auto* chat_option =
      sub->add_option("--chat", chat, "A user message, rendered with the model's chat template");
  prompt_option->excludes(chat_option);
  sub->add_option("--system", system, "A system message before --chat");
  sub->add_option("--chat-template", chat_template_path, "A Jinja template file to use instead");
  sub->add_option("--max-tokens", max_tokens, "Most tokens to generate")->capture_default_str();
  sub->add_option("--temperature", temperature,
                  "0 is greedy; default: the model's generation_config.json, else 1.0 (vLLM)");
  sub->add_option("--top-p", top_p, "Nucleus mass; default: generation_config.json, else 1.0");
  sub->add_option("--top-k", top_k, "Keep the k best tokens; default: generation_config, else off");
  sub->add_option("--min-p", min_p,
                  "Relative probability floor; default: generation_config, else 0");
  sub->add_option("--seed", seed, "Sampling seed (default: random)");
  sub->add_flag("--ignore-eos", ignore_eos, "Keep generating past end-of-sequence (benchmarks)");
  sub->add_option("--threads", threads, "Threads (default: all cores)");
  sub->add_option("--block-size", block_size, "KV cache block size in tokens")
      ->capture_default_str();
  sub->add_option("--max-model-len", max_model_len,
                  "Longest sequence in tokens (default: the model's context length)");
  sub->add_flag("--disable-hybrid-kv-cache-manager", disable_hybrid_kv_cache_manager,
                "One KV block table for every layer (docs/kv_cache_groups.md)");
  device.add_to(*sub);
  load.add_to(*sub);
  quantization.add_to(*sub);
  speculative.add_to(*sub);
  return sub;
}

int GenerateCommand::run(const char* argv0) const {
  if (prompt.empty() && chat.empty())
    return report_error(invalid_argument("give --prompt or --chat"));
  if (max_tokens < 1) return report_error(invalid_argument("--max-tokens must be at least 1"));
  if (block_size < 1) return report_error(invalid_argument("--block-size must be at least 1"));
  engine::ExecutorOptions load_flags;
  if (Status s = load.apply(load_flags); !s.ok()) return report_error(s);
  auto path = resolve_model_path(model, argv0);
  if (!path.ok()) return report_error(path.status());
  auto opened = load.open(*path, load_flags.load_format);
  if (!opened.ok()) return report_error(opened.status());
  const std::shared_ptr<const ModelFiles> files = opened->files;
  const Tokenizer& tokenizer = *opened->tokenizer;
  auto ids = prompt_ids(*this, *opened->tokenizer_files, tokenizer);
  if (!ids.ok()) return report_error(ids.status());
  const SamplingParams params = sampling_params(*this, files->generation);
  if (Status s = params.validate(); !s.ok()) return report_error(s);
  const auto num_prompt = static_cast<std::int64_t>(ids->size());
  if (num_prompt == 0) return report_error(invalid_argument("the prompt has no tokens"));
  if (speculative.enabled()) return generate_with_engine(*this, *opened, std::move(*ids), params);

  const std::int64_t max_chunk = std::min(num_prompt, kMaxPrefillChunk);
  auto made = make_executor(*this, files, max_chunk);
  if (!made.ok()) return report_error(made.status());
  ModelExecutor& exec = *made->executor;
  const std::int64_t max_len = exec.info().max_model_len;
  if (num_prompt >= max_len) {
    return report_error(invalid_argument("the prompt has " + std::to_string(num_prompt) +
                                         " tokens; --max-model-len is " + std::to_string(max_len)));
  }
  // One sequence: just enough blocks for the prompt and the tokens it may generate; sliding
  // layers keep a ring of their window's blocks (single_sequence_batcher.h) unless
  // --disable-hybrid-kv-cache-manager.
  const std::int64_t total = std::min(num_prompt + max_tokens, max_len);
  auto batcher = models::SingleSequenceBatcher::for_model(exec.info(), block_size, total, max_chunk,
                                                          disable_hybrid_kv_cache_manager);
  const std::int64_t layer_blocks = batcher.num_layer_blocks(exec.info());
  if (made->max_kv_blocks && layer_blocks > *made->max_kv_blocks * exec.info().num_layers) {
    return report_error(Status(StatusCode::kResourceExhausted,
                               "the sequence needs " + std::to_string(layer_blocks) +
                                   " KV blocks of one layer, GPU memory holds " +
                                   std::to_string(*made->max_kv_blocks * exec.info().num_layers) +
                                   "; lower --max-tokens or raise --gpu-memory-utilization"));
  }
  if (Status s = batcher.allocate(exec); !s.ok()) return report_error(s);

  ForwardBatch batch;
  std::vector<float> logits(static_cast<std::size_t>(exec.info().vocab_size));
  const std::vector<std::int32_t> stops = stop_ids(*files, tokenizer);
  // The same sampler as `serve` (the executor's), in slot 0; an unseeded run draws a fresh seed.
  std::random_device device;
  SamplingBatch sampling;
  sampling.rows.push_back(sampling::sampling_row(
      params, 0, (std::uint64_t{device()} << 32) ^ device(), /*num_logprobs=*/-1));
  const std::vector<std::int32_t> banned = ignore_eos ? std::vector<std::int32_t>{} : stops;
  if (Status s = exec.open_sampling_slot(0, sampling::slot_sampling_config(params, *ids, banned));
      !s.ok()) {
    return report_error(s);
  }
  StepOutput out;
  auto stream = tokenizer.start_decode({.skip_special_tokens = true});

  // Earlier prompt chunks only fill the cache; the last one samples the first token.
  const auto prefill_start = Clock::now();
  for (std::int64_t begin = 0; begin < num_prompt; begin += kMaxPrefillChunk) {
    const std::int64_t n = std::min(kMaxPrefillChunk, num_prompt - begin);
    if (Status s = batcher.next(std::span(*ids).subspan(begin, n), batch); !s.ok()) {
      return report_error(s);
    }
    const Status s = begin + n < num_prompt ? exec.forward(batch, logits.data())
                                            : exec.execute(batch, sampling, out);
    if (!s.ok()) return report_error(s);
  }
  const double prefill_seconds = seconds_since(prefill_start);

  const auto decode_start = Clock::now();
  std::int64_t generated = 0;
  while (true) {
    const std::int32_t token = out.token_ids[0];
    ++generated;
    sampling.rows[0].position = generated;
    const bool is_stop = std::find(stops.begin(), stops.end(), token) != stops.end();
    if (is_stop && !ignore_eos) break;
    std::cout << stream->push(token) << std::flush;
    // Like vLLM, --max-model-len bounds prompt and output together.
    if (generated == max_tokens || num_prompt + generated >= max_len) break;
    const std::int32_t next[] = {token};
    if (Status s = batcher.next(next, batch); !s.ok()) return report_error(s);
    if (Status s = exec.execute(batch, sampling, out); !s.ok()) return report_error(s);
  }
  const double decode_seconds = seconds_since(decode_start);
  std::cout << stream->finish() << "\n" << std::flush;

  // The first token comes from the prefill's logits; decode speed counts the steps after it.
  const std::int64_t pool_blocks = batcher.num_pool_blocks();
  std::fprintf(stderr,
               "prompt tokens: %lld, prefill: %.1f tokens/s\n"
               "generated tokens: %lld, decode: %.1f tokens/s (%s)\n"
               "kv cache: %lld blocks of %lld tokens, %lld layers each, block tables: %zu\n",
               static_cast<long long>(num_prompt), num_prompt / prefill_seconds,
               static_cast<long long>(generated),
               generated > 1 ? (generated - 1) / decode_seconds : 0.0, made->description.c_str(),
               static_cast<long long>(pool_blocks), static_cast<long long>(block_size),
               static_cast<long long>(layer_blocks / pool_blocks),
               batcher.ring_blocks().size() + 1);
  return 0;
}

}  // namespace pagoda::cli
