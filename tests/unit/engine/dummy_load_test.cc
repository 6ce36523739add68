// --load-format dummy through open_engine: a bare config.json with random CPU weights, a
// tokenizer from elsewhere whose vocabulary is smaller than the model's, the start-up report,
// the load-format spellings, and dummy weights quantized at load (--quantization fp8 / int4).
// The CUDA dummy path is exercised on a GPU (gpu_dummy_weights_test,
// scripts/gpu_serve_bench.sh); its refusals before loading hold here too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_engine.h"
#include "models/device_linear_plan.h"
#include "models/llama_weights.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"
#include "tokenizer/model_tokenizer.h"

namespace pagoda::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kTokenizerPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr std::int32_t kModelVocab = 50000;  // above SmolLM2's 49152

// A two-layer Llama config.json in a fresh folder; returns the file's path.
std::string write_tiny_config(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "config.json").string();
  std::ofstream(path) << R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50000,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": [2, 49999]
  })";
  return path;
}

TEST(LoadFormatTest, ParsesBothSpellingsAndNamesTheFlag) {
  EXPECT_EQ(*parse_load_format("auto"), LoadFormat::kAuto);
  EXPECT_EQ(*parse_load_format("dummy"), LoadFormat::kDummy);
  auto bad = parse_load_format("safetensors");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--load-format must be auto or dummy"));
}

TEST(LoadFormatTest, DummyOpensAConfigFileOrFolderWithoutWeights) {
  const std::string path = write_tiny_config("pagoda_dummy_open");
  for (const std::string& given : {path, std::filesystem::path(path).parent_path().string()}) {
    auto files = open_model_for(given, LoadFormat::kDummy);
    ASSERT_TRUE(files.ok()) << files.status().to_string();
    EXPECT_EQ(files->config.vocab_size, kModelVocab);
    EXPECT_EQ(files->config.num_hidden_layers, 2);
    EXPECT_TRUE(files->tensors.empty());
  }
  // The same folder has no weights, so the real load format refuses it.
  auto real = open_model_for(std::filesystem::path(path).parent_path().string(), LoadFormat::kAuto);
  EXPECT_FALSE(real.ok());
  auto missing = open_model_for("/nonexistent/config.json", LoadFormat::kDummy);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(LoadFormatTest, DummyWeightsAreSeededAndBounded) {
  auto files = open_model_for(write_tiny_config("pagoda_dummy_seed"), LoadFormat::kDummy);
  ASSERT_TRUE(files.ok());
  auto a = models::dummy_llama_weights(files->config, 7);
  auto b = models::dummy_llama_weights(files->config, 7);
  auto c = models::dummy_llama_weights(files->config, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().to_string();
  ASSERT_EQ(a->layers.size(), 2u);
  EXPECT_EQ(a->embed_tokens.num_rows, kModelVocab);
  EXPECT_NE(a->lm_head.data, a->embed_tokens.data);  // tie_word_embeddings false
  const auto* qa = static_cast<const std::uint16_t*>(a->layers[1].q_proj.data);
  const auto* qb = static_cast<const std::uint16_t*>(b->layers[1].q_proj.data);
  const auto* qc = static_cast<const std::uint16_t*>(c->layers[1].q_proj.data);
  const std::int64_t n = a->layers[1].q_proj.num_rows * a->layers[1].q_proj.num_cols;
  EXPECT_TRUE(std::equal(qa, qa + n, qb));
  EXPECT_FALSE(std::equal(qa, qa + n, qc));
  // The CUDA executor's layout: q, k and v are row blocks of one fused QKV draw.
  const models::LlamaLayerWeights& layer = a->layers[1];
  EXPECT_EQ(layer.k_proj.data, static_cast<const std::uint16_t*>(layer.q_proj.data) +
                                   layer.q_proj.num_rows * layer.q_proj.num_cols);
  EXPECT_EQ(layer.v_proj.data, static_cast<const std::uint16_t*>(layer.k_proj.data) +
                                   layer.k_proj.num_rows * layer.k_proj.num_cols);
  EXPECT_EQ(layer.up_proj.data, static_cast<const std::uint16_t*>(layer.gate_proj.data) +
                                    layer.gate_proj.num_rows * layer.gate_proj.num_cols);
  // [0.9, 1.1) rounded to bf16, as the device stores them.
  for (const float w : a->layers[0].input_layernorm) {
    EXPECT_GE(w, 0.8984375f);
    EXPECT_LE(w, 1.1015625f);
    std::uint32_t bits = 0;
    std::memcpy(&bits, &w, sizeof(bits));
    EXPECT_EQ(bits & 0xFFFFu, 0u) << w;
  }
  EXPECT_EQ(a->rope_inv_freq.size(), 8u);  // head_dim 16
}

// The bytes of a quantized view (rows x the type's row bytes).
std::vector<std::uint8_t> bytes_of(const cpu::TensorView& v) {
  const auto* data = static_cast<const std::uint8_t*>(v.data);
  return {data, data + v.num_rows * v.row_stride};
}

// `view` (bf16) quantized as --quantization quantizes a checkpoint's weight.
std::vector<std::uint8_t> quantized(const cpu::TensorView& view,
                                    quant::LoadTimeQuantization quantization) {
  ModelTensor t;
  t.dtype = DType::kBF16;
  t.shape = {static_cast<std::uint64_t>(view.num_rows), static_cast<std::uint64_t>(view.num_cols)};
  t.data = std::span(static_cast<const std::uint8_t*>(view.data),
                     static_cast<std::size_t>(view.num_rows * view.num_cols) * 2);
  auto m = quantization == quant::LoadTimeQuantization::kFp8
               ? quant::quantize_fp8_per_channel("w", t, view.num_rows, view.num_cols)
               : quant::quantize_int4_rtn("w", t, view.num_rows, view.num_cols);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? std::vector<std::uint8_t>(m->bytes.begin(), m->bytes.end())
                : std::vector<std::uint8_t>{};
}

// --quantization with dummy weights: the bf16 draws of the same seed, quantized exactly as a
// checkpoint's weights are (F8_S / Q4_Z), layer by layer; the embedding, the LM head, norms and
// RoPE as drawn. The CUDA executor makes the same layers its FP8 / W4A16 kinds.
TEST(LoadFormatTest, DummyWeightsQuantizedAtLoadAreTheDrawsQuantized) {
  auto files = open_model_for(write_tiny_config("pagoda_dummy_quantized"), LoadFormat::kDummy);
  ASSERT_TRUE(files.ok());
  auto plain = models::dummy_llama_weights(files->config, 7);
  ASSERT_TRUE(plain.ok());
  for (const auto q : {quant::LoadTimeQuantization::kFp8, quant::LoadTimeQuantization::kInt4}) {
    SCOPED_TRACE(std::string(quant::load_time_quantization_name(q)));
    auto w = models::dummy_llama_weights(files->config, 7, q);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const DType want_type = q == quant::LoadTimeQuantization::kFp8 ? DType::kF8_S : DType::kQ4_Z;
    const models::DeviceLinearKind want_kind = q == quant::LoadTimeQuantization::kFp8
                                                   ? models::DeviceLinearKind::kFp8
                                                   : models::DeviceLinearKind::kW4A16;
    ASSERT_EQ(w->layers.size(), plain->layers.size());
    for (std::size_t i = 0; i < w->layers.size(); ++i) {
      const models::LlamaLayerWeights& got = w->layers[i];
      const models::LlamaLayerWeights& drawn = plain->layers[i];
      const std::pair<const cpu::TensorView*, const cpu::TensorView*> pairs[] = {
          {&got.q_proj, &drawn.q_proj},       {&got.k_proj, &drawn.k_proj},
          {&got.v_proj, &drawn.v_proj},       {&got.o_proj, &drawn.o_proj},
          {&got.gate_proj, &drawn.gate_proj}, {&got.up_proj, &drawn.up_proj},
          {&got.down_proj, &drawn.down_proj}};
      for (const auto& [g, d] : pairs) {
        EXPECT_EQ(g->dtype, want_type);
        EXPECT_EQ(g->num_rows, d->num_rows);
        EXPECT_EQ(g->num_cols, d->num_cols);
        EXPECT_EQ(bytes_of(*g), quantized(*d, q)) << "layer " << i;
      }
      const cpu::TensorView qkv[] = {got.q_proj, got.k_proj, got.v_proj};
      const cpu::TensorView gate_up[] = {got.gate_proj, got.up_proj};
      EXPECT_EQ(models::device_linear_kind(qkv, true), want_kind);
      EXPECT_EQ(models::device_linear_kind(gate_up, true), want_kind);
      EXPECT_EQ(models::device_linear_kind(std::span(&got.down_proj, 1), true), want_kind);
      EXPECT_EQ(got.input_layernorm, drawn.input_layernorm);
      EXPECT_EQ(got.post_attention_layernorm, drawn.post_attention_layernorm);
    }
    // Embedding and LM head stay bf16 and are the same draws (the seeds after the layers too).
    EXPECT_EQ(w->embed_tokens.dtype, DType::kBF16);
    EXPECT_EQ(w->lm_head.dtype, DType::kBF16);
    const auto* lm = static_cast<const std::uint16_t*>(w->lm_head.data);
    const auto* lm_plain = static_cast<const std::uint16_t*>(plain->lm_head.data);
    EXPECT_TRUE(std::equal(lm, lm + w->lm_head.num_rows * w->lm_head.num_cols, lm_plain));
    EXPECT_EQ(w->norm, plain->norm);
    // Only the bf16 embedding and LM head are kept, not the layers' bf16 draws.
    EXPECT_EQ(w->dummy_storage.size(), plain->dummy_storage.size() - 4 * w->layers.size());
  }
}

TEST(StartupReportTest, SummaryListsPhasesAndTotal) {
  StartupReport report;
  report.add("tokenizer", 0.05);
  report.add("weights", 3.1);
  EXPECT_EQ(report.summary(), "startup: tokenizer 0.05 s, weights 3.10 s, total 3.15 s");
  EXPECT_EQ(report.graphs_summary(), "");
  report.graphs = StartupReport::Graphs{
      .count = 35, .max_num_seqs = 256, .seconds = 0.7, .bytes = std::int64_t{38} << 20};
  EXPECT_EQ(report.graphs_summary(), "cuda graphs: 35 sizes up to 256 in 0.70 s, 38 MiB");
  report.graphs->enforce_eager = true;
  report.graphs->count = 0;
  EXPECT_EQ(report.graphs_summary(), "cuda graphs: off (--enforce-eager)");
}

class DummyEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTokenizerPath)) {
      GTEST_SKIP() << kTokenizerPath << " is absent: run scripts/setup.sh";
    }
  }

  static std::vector<std::int32_t> run(EngineClient& client, EngineRequest request,
                                       std::int64_t* completion_tokens, std::string* text) {
    auto stream = client.submit(std::move(request));
    EXPECT_TRUE(stream.ok()) << stream.status().to_string();
    std::vector<std::int32_t> tokens;
    if (!stream.ok()) return tokens;
    while (true) {
      auto item = (*stream)->next(std::chrono::seconds(60));
      if (!item.ok()) break;
      EXPECT_TRUE(item->error.ok()) << item->error.to_string();
      tokens.insert(tokens.end(), item->output.token_ids.begin(), item->output.token_ids.end());
      *text += item->output.text;
      if (item->output.finished) *completion_tokens = item->output.usage.num_completion_tokens;
    }
    return tokens;
  }
};

// The platform team's case in small: a config with no weights, another model's tokenizer whose
// vocabulary is smaller, every start-up phase reported.
TEST_F(DummyEngineTest, ServesAConfigWithAnotherModelsTokenizer) {
  auto tokenizer_files = open_model_files(kTokenizerPath);
  ASSERT_TRUE(tokenizer_files.ok());
  auto tokenizer = load_model_tokenizer(*tokenizer_files);
  ASSERT_TRUE(tokenizer.ok());
  ASSERT_LT((*tokenizer)->vocab_size(), kModelVocab);

  EngineOptions options;
  options.model_path = write_tiny_config("pagoda_dummy_engine");
  options.tokenizer = std::move(*tokenizer);
  options.executor = {.device = Device::kCpu, .num_threads = 2, .load_format = LoadFormat::kDummy};
  options.engine.scheduler.max_model_len = 256;
  options.engine.scheduler.max_num_seqs = 4;
  options.engine.scheduler.max_num_batched_tokens = 128;
  options.engine.kv_cache_memory_bytes = std::int64_t{4} << 20;
  StartupReport startup;
  options.startup = &startup;
  auto client = open_engine(std::move(options));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_EQ(startup.phases.size(), 2u);  // the tokenizer came loaded
  EXPECT_EQ(startup.phases[0].first, "weights");
  EXPECT_EQ(startup.phases[1].first, "kv cache");
  EXPECT_THAT(startup.summary(), StartsWith("startup: weights "));
  EXPECT_FALSE(startup.graphs.has_value());  // the CPU has none

  // Prompt ids the tokenizer lacks but the model has; a biased draw makes every sampled id
  // one the tokenizer lacks too, which must decode to nothing rather than fail the request.
  EngineRequest request;
  request.prompt_token_ids = {1, 49152, 49999, 300};
  request.max_tokens = 6;
  request.ignore_eos = true;
  request.sampling.temperature = 0.0;
  request.sampling.logit_bias = {{49500, 100.0}};
  std::int64_t completion_tokens = 0;
  std::string text;
  const auto tokens = run(**client, std::move(request), &completion_tokens, &text);
  EXPECT_EQ(tokens, std::vector<std::int32_t>(6, 49500));
  EXPECT_EQ(completion_tokens, 6);
  EXPECT_EQ(text, "");

  // Ordinary greedy decoding on random weights: max_tokens tokens, inside the model's vocab.
  EngineRequest plain;
  plain.prompt_token_ids = {1, 500, 600, 700};
  plain.max_tokens = 8;
  plain.ignore_eos = true;
  plain.sampling.temperature = 0.0;
  text.clear();
  const auto plain_tokens = run(**client, std::move(plain), &completion_tokens, &text);
  EXPECT_EQ(plain_tokens.size(), 8u);
  EXPECT_EQ(completion_tokens, 8);
  for (const std::int32_t t : plain_tokens) EXPECT_LT(t, kModelVocab);
}

// --load-format dummy --quantization fp8 / int4 on the CPU: the engine runs the quantized
// layers (F8_S / Q4_Z), and greedy decoding is deterministic from one engine to the next.
TEST_F(DummyEngineTest, QuantizedDummyWeightsGenerateDeterministically) {
  auto tokenizer_files = open_model_files(kTokenizerPath);
  ASSERT_TRUE(tokenizer_files.ok());
  auto loaded = load_model_tokenizer(*tokenizer_files);
  ASSERT_TRUE(loaded.ok());
  const std::shared_ptr<const Tokenizer> tokenizer = std::move(*loaded);
  const std::string config = write_tiny_config("pagoda_dummy_quantized_engine");
  for (const auto q : {quant::LoadTimeQuantization::kFp8, quant::LoadTimeQuantization::kInt4}) {
    SCOPED_TRACE(std::string(quant::load_time_quantization_name(q)));
    std::vector<std::vector<std::int32_t>> runs;
    for (int run_index = 0; run_index < 2; ++run_index) {
      EngineOptions options;
      options.model_path = config;
      options.tokenizer = tokenizer;
      options.executor = {.device = Device::kCpu,
                          .num_threads = 2,
                          .quantization = q,
                          .load_format = LoadFormat::kDummy};
      options.engine.scheduler.max_model_len = 128;
      options.engine.scheduler.max_num_seqs = 2;
      options.engine.scheduler.max_num_batched_tokens = 64;
      options.engine.kv_cache_memory_bytes = std::int64_t{16} << 20;
      StartupReport startup;
      options.startup = &startup;
      auto client = open_engine(std::move(options));
      ASSERT_TRUE(client.ok()) << client.status().to_string();
      EXPECT_EQ(startup.phases[0].first, "weights");
      EXPECT_EQ(startup.weights, "");  // the CUDA executor's description only
      EngineRequest request;
      request.prompt_token_ids = {1, 400, 500, 600, 700};
      request.max_tokens = 6;
      request.ignore_eos = true;
      request.sampling.temperature = 0.0;
      std::int64_t completion_tokens = 0;
      std::string text;
      runs.push_back(run(**client, std::move(request), &completion_tokens, &text));
      EXPECT_EQ(completion_tokens, 6);
    }
    EXPECT_EQ(runs[0].size(), 6u);
    EXPECT_EQ(runs[0], runs[1]);
  }
}

// --load-format dummy with a GGUF file takes its config (and its tokenizer) and ignores its
// weights.
TEST_F(DummyEngineTest, DummyWithAGgufTakesItsShapes) {
  EngineOptions options;
  options.model_path = kTokenizerPath;
  options.executor = {.device = Device::kCpu, .num_threads = 2, .load_format = LoadFormat::kDummy};
  options.engine.scheduler.max_model_len = 128;
  options.engine.scheduler.max_num_seqs = 2;
  options.engine.scheduler.max_num_batched_tokens = 64;
  options.engine.kv_cache_memory_bytes = std::int64_t{16} << 20;
  StartupReport startup;
  options.startup = &startup;
  auto client = open_engine(std::move(options));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  ASSERT_EQ(startup.phases.size(), 3u);
  EXPECT_EQ(startup.phases[0].first, "tokenizer");
  EngineRequest request;
  request.prompt_token_ids = {1, 2, 3};
  request.max_tokens = 3;
  request.ignore_eos = true;
  std::int64_t completion_tokens = 0;
  std::string text;
  EXPECT_EQ(run(**client, std::move(request), &completion_tokens, &text).size(), 3u);
}

}  // namespace
}  // namespace pagoda::engine
