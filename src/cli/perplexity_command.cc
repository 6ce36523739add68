// `pagoda perplexity`: how well the model predicts a text, the standard check that a quantized
// model still is the model. The text is tokenized once and cut into non-overlapping windows of
// --ctx tokens; in each window every token after the first is scored given the ones before it
// (a fresh sequence per window, like llama.cpp's llama-perplexity, which however scores only the
// second half of each window). PPL = exp(mean negative log-likelihood over scored tokens).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "cli/commands.h"
#include "cli/model_assets.h"
#include "engine/model_engine.h"
#include "models/single_sequence_batcher.h"

namespace pagoda::cli {

namespace {

constexpr std::int64_t kBlockSize = 16;

StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("--text-file " + path + ": cannot open it");
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().empty()) return invalid_argument("--text-file " + path + " is empty");
  return text.str();
}

// -log softmax(logits)[target], in double.
double negative_log_likelihood(const float* logits, std::int64_t vocab, std::int32_t target) {
  float max_logit = logits[0];
  for (std::int64_t v = 1; v < vocab; ++v) max_logit = std::max(max_logit, logits[v]);
  double sum = 0.0;
  for (std::int64_t v = 0; v < vocab; ++v)
    sum += std::exp(static_cast<double>(logits[v] - max_logit));
  return std::log(sum) + max_logit - logits[target];
}

struct PerplexityResult {
  double nll_sum = 0.0;
  std::int64_t num_scored = 0;
  std::int64_t num_windows = 0;
};

StatusOr<PerplexityResult> evaluate(ModelExecutor& exec, const std::vector<std::int32_t>& tokens,
                                    std::int64_t ctx, std::int64_t max_windows) {
  const std::int64_t vocab = exec.info().vocab_size;
  const std::int64_t num_blocks = (ctx + kBlockSize - 1) / kBlockSize;
  PAGODA_RETURN_IF_ERROR(exec.allocate_kv_cache(num_blocks, kBlockSize));
  std::vector<float> logits(static_cast<std::size_t>(ctx * vocab));
  ForwardBatch batch;
  PerplexityResult result;
  const auto total = static_cast<std::int64_t>(tokens.size());
  for (std::int64_t start = 0; start + 1 < total; start += ctx) {
    if (max_windows > 0 && result.num_windows == max_windows) break;
    const std::int64_t n = std::min(ctx, total - start);
    // A fresh sequence in the same blocks: the window's K/V overwrites the last one's.
    models::SingleSequenceBatcher batcher(kBlockSize, num_blocks);
    PAGODA_RETURN_IF_ERROR(batcher.next(std::span(tokens).subspan(start, n), batch));
    batch.logits_indices.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) batch.logits_indices[i] = static_cast<std::int32_t>(i);
    PAGODA_RETURN_IF_ERROR(exec.forward(batch, logits.data()));
    for (std::int64_t i = 0; i + 1 < n; ++i) {
      result.nll_sum += negative_log_likelihood(logits.data() + i * vocab, vocab,
                                                tokens[static_cast<std::size_t>(start + i + 1)]);
    }
    result.num_scored += n - 1;
    ++result.num_windows;
  }
  return result;
}

}  // namespace

CLI::App* PerplexityCommand::add_to(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "perplexity", "Perplexity of the model on a text file, over windows of --ctx tokens");
  sub->add_option("model", model, "A .gguf file or a Hugging Face model folder (default model)");
  sub->add_option("--text-file", text_file, "UTF-8 text to score")->required();
  sub->add_option("--ctx", ctx, "Tokens per window")->capture_default_str();
  sub->add_option("--max-windows", max_windows, "Score at most this many windows (0: all)")
      ->capture_default_str();
  sub->add_option("--threads", threads, "CPU threads (default: all cores)");
  sub->add_flag("--json", json, "Print one JSON object instead of text");
  quantization.add_to(*sub);
  device.add_to(*sub);
  return sub;
}

int PerplexityCommand::run(const char* argv0) const {
  if (ctx < 2) return report_error(invalid_argument("--ctx must be at least 2"));
  if (max_windows < 0) return report_error(invalid_argument("--max-windows must be >= 0"));
  engine::ExecutorOptions options{.num_threads = threads};
  // Sets the CPU's activation rounding too, before the weights load.
  if (Status s = device.apply(quantization, options); !s.ok()) return report_error(s);
  auto text = read_text(text_file);
  if (!text.ok()) return report_error(text.status());
  auto opened = open_model_and_tokenizer(model, argv0);
  if (!opened.ok()) return report_error(opened.status());
  const std::shared_ptr<const ModelFiles> files = opened->files;
  Tokenizer& tokenizer = *opened->tokenizer;
  const std::vector<std::int32_t> tokens = tokenizer.encode(*text);
  if (tokens.size() < 2) {
    return report_error(invalid_argument("--text-file has fewer than 2 tokens"));
  }
  // One sequence whose whole window is one prefill step.
  auto executor = engine::open_executor(
      files, options, {.max_num_batched_tokens = ctx, .max_num_seqs = 1, .block_size = kBlockSize});
  if (!executor.ok()) return report_error(executor.status());
  ModelExecutor& exec = *executor->executor;
  if (ctx > exec.info().max_model_len) {
    return report_error(invalid_argument("--ctx " + std::to_string(ctx) + " exceeds the model's " +
                                         std::to_string(exec.info().max_model_len) +
                                         "-token context"));
  }
  auto result = evaluate(exec, tokens, ctx, max_windows);
  if (!result.ok()) return report_error(result.status());
  const double ppl = std::exp(result->nll_sum / static_cast<double>(result->num_scored));
  const std::string quant = files->quantization.method != QuantizationMethod::kNone
                                ? files->quantization.summary()
                                : quantization.quantization;
  const bool cuda = options.device == engine::Device::kCuda;
  // The cache and the activations in effect, not as asked: on the CPU int16 and int8 need AVX2
  // (and apply to the int16 kernels' types); CUDA keeps activations and cache in --dtype.
  const std::string kv = cuda ? (options.fp8_kv_cache ? "fp8" : device.dtype)
                         : options.kv_cache_dtype == cpu::KvDtype::kF16 ? "fp16"
                                                                        : "fp32";
  const std::string activations = cuda                           ? device.dtype
                                  : cpu::cpu_int8_activations()  ? "int8"
                                  : cpu::cpu_int16_activations() ? "int16"
                                                                 : "fp32";
  if (json) {
    const nlohmann::json out = {{"perplexity", ppl},
                                {"num_tokens", result->num_scored},
                                {"num_windows", result->num_windows},
                                {"ctx", ctx},
                                {"device", cuda ? "cuda" : "cpu"},
                                {"executor", executor->description},
                                {"quantization", quant},
                                {"kv_cache_dtype", kv},
                                {cuda ? "dtype" : "cpu_activations", activations}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf(
        "perplexity %.4f over %lld tokens (%lld windows of <= %lld, %s, quantization %s, KV cache "
        "%s, activations %s)\n",
        ppl, static_cast<long long>(result->num_scored),
        static_cast<long long>(result->num_windows), static_cast<long long>(ctx),
        executor->description.c_str(), quant.c_str(), kv.c_str(), activations.c_str());
  }
  return 0;
}

}  // namespace pagoda::cli
