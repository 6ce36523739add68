// Quantized weights kept quantized by the CUDA executor (models/device_linear_plan.h): 4-bit
// Q4_Z / Q4_0 as W4A16 layers, the other GGUF types in the W4A16 kernel's GGUF form (4- or
// 8-bit codes), per-channel F8_S as FP8 W8A8 layers, against the CPU executor on the same
// weights. The CPU multiplies the quantized numbers exactly with fp32 activations, so
// the tolerances come from what the GPU rounds besides:
//
//   W4A16 (bf16 / f16 activations): up to kW4A16KernelMaxRows rows the kernel multiplies the
//     exact weights d * (q - z) (the zero subtracted exactly, each group's fp32 sum scaled
//     once); past them the layer dequantizes them to the activation dtype, one rounding, as a
//     dense upload does. So the bound of the dense BF16 test holds: 5e-2 relative L2 (about one
//     rounding, u = 2^-8, per op, ~20 ops deep). The GGUF form (W4A16 and W8A16) is the same
//     argument: its codes are exact in the 16-bit fragments, (S sc) is exact in fp32, and the
//     min term B mc multiplies x's group sum (fp32) once per group, so the weights are the
//     CPU's unrounded; the GPU's roundings are bf16 activations' and fp32 sums'.
//   FP8 W8A8 (bf16 activations): every product's input is also rounded to E4M3 per token (3
//     mantissa bits: relative error <= 2^-4, RMS ~2^-4 / sqrt(3) = 0.036 per element), 4 such
//     inputs per layer (QKV, O, gate/up, down) over 2 layers: sqrt(8) x 0.036 = 0.10 relative
//     L2 if independent (a numpy model of the same network measured 0.075 median, 0.133 at the
//     worst of 200 rows); with the bf16 bound on top, 0.25. A wrong scale, code order or
//     permutation moves the logits by O(1).
//
// Each random-model run also checks what the weights became (weights_summary), so a layer that
// silently fell back to dense fails; the decode steps replay the decode CUDA graphs with the
// quantized layers captured in them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>

#include "kernels/gemm/w4a16_linear.h"
#include "model/dequantize.h"
#include "models/cpu_model_executor.h"
#include "models/cuda_model_executor.h"
#include "quant/float_codes.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"
#include "tests/gpu/executor_vs_cpu.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/random_llama.h"
#include "tests/unit/models/model_test_util.h"
#include "tests/unit/quant/gguf_test_blocks.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using ::testing::HasSubstr;

constexpr double kW4A16Tolerance = 5e-2;
constexpr double kFp8Tolerance = 0.25;

enum class Form {
  kInt4,                ///< Q4_Z, group 128 (--quantization int4)
  kInt4ActOrder,        ///< Q4_Z in a random stored column order, one order per fused layer
  kInt4ActOrderByPart,  ///< the same, but Q, K, V and gate, up each in an order of their own
  kFp8,                 ///< F8_S, one scale per row (--quantization fp8)
  kQ4_0,                ///< GGUF Q4_0: d = max|w| / 7 per 32 weights, w = d (q - 8)
};

// GGUF Q4_0 blocks of a dense fp32 matrix (18 bytes per 32 weights: fp16 d, then weight j in
// the low nibble of byte j and weight j + 16 in the high nibble).
quant::QuantizedMatrix q4_0(const cpu::TensorView& view) {
  quant::QuantizedMatrix m;
  m.dtype = DType::kQ4_0;
  m.rows = view.num_rows;
  m.cols = view.num_cols;
  m.group_size = 32;
  m.bytes.resize(static_cast<std::size_t>(m.rows) * m.row_bytes());
  std::uint8_t* out = m.bytes.data();
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const auto* w = reinterpret_cast<const float*>(view.row(r));
    for (std::int64_t b = 0; b < m.cols / 32; ++b, out += 18) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(w[b * 32 + j]));
      const std::uint16_t bits = quant::float_to_fp16(amax / 7.0f);
      const float d = fp16_to_float(bits);
      out[0] = static_cast<std::uint8_t>(bits & 0xFF);
      out[1] = static_cast<std::uint8_t>(bits >> 8);
      for (int j = 0; j < 16; ++j) {
        const auto code = [&](int i) {
          const float q = d > 0.0f ? std::nearbyint(w[b * 32 + i] / d) : 0.0f;
          return static_cast<std::uint8_t>(std::clamp(q + 8.0f, 0.0f, 15.0f));
        };
        out[2 + j] = static_cast<std::uint8_t>(code(j) | (code(j + 16) << 4));
      }
    }
  }
  return m;
}

// `view` (a dense matrix of the host model) quantized by the load-time quantizers, kept in
// `weights.repacked`; the returned view is what the loader would hand the executors.
cpu::TensorView quantize(models::LlamaWeights& weights, const cpu::TensorView& view, Form form,
                         const std::vector<std::int32_t>* permutation) {
  const ModelTensor tensor{
      "w",
      view.dtype,
      {static_cast<std::uint64_t>(view.num_rows), static_cast<std::uint64_t>(view.num_cols)},
      std::span(static_cast<const std::uint8_t*>(view.data),
                static_cast<std::size_t>(view.num_rows) * view.row_stride)};
  auto q = form == Form::kFp8
               ? quant::quantize_fp8_per_channel("w", tensor, view.num_rows, view.num_cols)
           : form == Form::kQ4_0
               ? StatusOr<quant::QuantizedMatrix>(q4_0(view))
               : quant::quantize_int4_rtn("w", tensor, view.num_rows, view.num_cols);
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  if (permutation != nullptr) q->input_permutation = *permutation;
  auto owned = std::make_shared<const quant::QuantizedMatrix>(std::move(*q));
  cpu::TensorView out =
      cpu::dense_view(owned->bytes.data(), owned->dtype, owned->rows, owned->cols);
  if (!owned->input_permutation.empty()) out.input_permutation = owned->input_permutation.data();
  weights.repacked.push_back(std::move(owned));
  return out;
}

std::vector<std::int32_t> random_order(std::int64_t n, std::mt19937& rng) {
  std::vector<std::int32_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), rng);
  return p;
}

// Every decoder layer matrix of `weights` replaced by its quantization in `form`.
void quantize_layers(const ModelConfig& c, models::LlamaWeights& weights, Form form,
                     std::uint32_t seed) {
  std::mt19937 rng(seed);
  const bool act_order = form == Form::kInt4ActOrder || form == Form::kInt4ActOrderByPart;
  const bool by_part = form == Form::kInt4ActOrderByPart;
  for (models::LlamaLayerWeights& l : weights.layers) {
    // One order per input: the parts of a fused layer see the same activations.
    const auto hidden = random_order(c.hidden_size, rng);
    const auto attn = random_order(c.num_attention_heads * c.head_dim, rng);
    const auto inter = random_order(c.intermediate_size, rng);
    std::vector<std::vector<std::int32_t>> own;
    const auto order =
        [&](const std::vector<std::int32_t>& shared) -> const std::vector<std::int32_t>* {
      if (!act_order) return nullptr;
      if (!by_part) return &shared;
      own.push_back(random_order(static_cast<std::int64_t>(shared.size()), rng));
      return &own.back();
    };
    own.reserve(8);
    l.q_proj = quantize(weights, l.q_proj, form, order(hidden));
    l.k_proj = quantize(weights, l.k_proj, form, order(hidden));
    l.v_proj = quantize(weights, l.v_proj, form, order(hidden));
    l.o_proj = quantize(weights, l.o_proj, form, act_order ? &attn : nullptr);
    l.gate_proj = quantize(weights, l.gate_proj, form, order(hidden));
    l.up_proj = quantize(weights, l.up_proj, form, order(hidden));
    l.down_proj = quantize(weights, l.down_proj, form, act_order ? &inter : nullptr);
  }
}

// GGUF blocks of `type` for `view` (a dense fp32 matrix of the host model), kept in
// `weights.repacked` as a loader would map them from a file.
cpu::TensorView gguf(models::LlamaWeights& weights, const cpu::TensorView& view, DType type) {
  std::vector<float> dense(static_cast<std::size_t>(view.num_rows * view.num_cols));
  for (std::int64_t r = 0; r < view.num_rows; ++r) {
    std::memcpy(dense.data() + r * view.num_cols, view.row(r),
                static_cast<std::size_t>(view.num_cols) * sizeof(float));
  }
  auto owned = std::make_shared<quant::QuantizedMatrix>();
  owned->dtype = type;
  owned->rows = view.num_rows;
  owned->cols = view.num_cols;
  owned->group_size = 32;
  const std::vector<std::uint8_t> blocks =
      quant::testing::quantize_gguf(type, dense.data(), view.num_rows, view.num_cols);
  owned->bytes.assign(blocks.begin(), blocks.end());
  const cpu::TensorView out = cpu::dense_view(owned->bytes.data(), type, owned->rows, owned->cols);
  weights.repacked.push_back(std::move(owned));
  return out;
}

// Every decoder layer matrix as GGUF `type`, but V and down as `v_down` (a Q4_K_M file's mix
// gives some layers' V and down Q6_K).
void gguf_layers(models::LlamaWeights& weights, DType type, DType v_down) {
  for (models::LlamaLayerWeights& l : weights.layers) {
    l.q_proj = gguf(weights, l.q_proj, type);
    l.k_proj = gguf(weights, l.k_proj, type);
    l.v_proj = gguf(weights, l.v_proj, v_down);
    l.o_proj = gguf(weights, l.o_proj, type);
    l.gate_proj = gguf(weights, l.gate_proj, type);
    l.up_proj = gguf(weights, l.up_proj, type);
    l.down_proj = gguf(weights, l.down_proj, v_down);
  }
}

// The token tables as a GGUF file holds them: the embedding as `embed`, an untied LM head
// (Qwen2's) as `head`, a tied one the embedding itself. They stay in their W4A16 form on the GPU
// (rows dequantized per lookup, the LM head through the W4A16 kernel with fp32 logits).
void gguf_tables(models::LlamaWeights& weights, DType embed, DType head) {
  const bool tied = weights.lm_head.data == weights.embed_tokens.data;
  weights.embed_tokens = gguf(weights, weights.embed_tokens, embed);
  weights.lm_head = tied ? weights.embed_tokens : gguf(weights, weights.lm_head, head);
}

struct GgufTables {
  DType embed = DType::kF32;  ///< kF32: the tables stay dense (fp32 in, bf16 on the GPU)
  DType head = DType::kF32;   ///< an untied LM head's type
  std::string want;           ///< what the weights summary says of them
};

void run_gguf(bool qwen2, ScalarType type, DType dtype, DType v_down,
              const std::string& want_summary, const GgufTables& tables = {}) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto model = gpu_test::make_model(qwen2, type, qwen2 ? 27u : 28u);
  ASSERT_EQ(model->weights.layers[0].q_proj.dtype, DType::kF32);
  gguf_layers(model->weights, dtype, v_down);
  if (tables.embed != DType::kF32) gguf_tables(model->weights, tables.embed, tables.head);
  std::string summary;
  gpu_test::run_against_cpu(model->config, model->weights, type, kW4A16Tolerance,
                            qwen2 ? "qwen2" : "llama", &summary);
  EXPECT_THAT(summary, HasSubstr(want_summary));
  if (tables.embed == DType::kF32) {
    EXPECT_THAT(summary, ::testing::Not(HasSubstr("embedding")));
  } else {
    EXPECT_THAT(summary, HasSubstr(tables.want));
  }
}

void run_quantized(bool qwen2, ScalarType type, Form form, double tolerance,
                   const std::string& want_summary) {
  PAGODA_SKIP_WITHOUT_GPU();
  const auto model = gpu_test::make_model(qwen2, type, qwen2 ? 17u : 18u);
  quantize_layers(model->config, model->weights, form, 19u);
  std::string summary;
  gpu_test::run_against_cpu(model->config, model->weights, type, tolerance,
                            qwen2 ? "qwen2" : "llama", &summary);
  EXPECT_THAT(summary, HasSubstr(want_summary));
}

TEST(GpuQuantizedExecutor, Int4LlamaBf16MatchesCpu) {
  run_quantized(false, ScalarType::kBF16, Form::kInt4, kW4A16Tolerance, "8 w4a16 linear layers");
}

TEST(GpuQuantizedExecutor, Int4ActOrderQwen2Bf16MatchesCpu) {
  run_quantized(true, ScalarType::kBF16, Form::kInt4ActOrder, kW4A16Tolerance,
                "8 w4a16 linear layers");
}

TEST(GpuQuantizedExecutor, Int4ActOrderLlamaF16MatchesCpu) {
  run_quantized(false, ScalarType::kF16, Form::kInt4ActOrder, kW4A16Tolerance,
                "8 w4a16 linear layers");
}

// Q, K, V (and gate, up) in different column orders cannot share one W4A16 matrix: those fused
// layers go dense (the quantized numbers rounded to bf16 once), O and down stay 4-bit.
TEST(GpuQuantizedExecutor, FusedPartsInTheirOwnOrdersAreDenseAndCorrect) {
  run_quantized(true, ScalarType::kBF16, Form::kInt4ActOrderByPart, kW4A16Tolerance,
                "4 w4a16 + 4 dense linear layers");
}

// FP32 runs multiply the quantized numbers dense: exact up to summation order.
TEST(GpuQuantizedExecutor, Int4ActOrderFp32IsDenseAndExact) {
  run_quantized(true, ScalarType::kF32, Form::kInt4ActOrder, 1e-4, "8 dense linear layers");
}

// GGUF Q4_0 layers (a llama.cpp file's) stay 4-bit too; the CPU oracle multiplies them with
// int16 activations (2^-16 of a block's largest |x|: far below bf16's rounding).
TEST(GpuQuantizedExecutor, GgufQ4_0LlamaBf16MatchesCpu) {
  run_quantized(false, ScalarType::kBF16, Form::kQ4_0, kW4A16Tolerance, "8 w4a16 linear layers");
}

// The other GGUF types stay quantized too, in the W4A16 kernel's GGUF form (4-bit codes for
// Q4_1, Q4_K; 5-bit Q5_0, Q5_K; 6-bit Q6_K; 8-bit Q8_0): the weights are the CPU's, unrounded (the
// kernel multiplies (S sc)(q - z) and adds B mc times x's group sum), so the W4A16 bound holds.
TEST(GpuQuantizedExecutor, GgufQ4_1LlamaBf16MatchesCpu) {
  run_gguf(false, ScalarType::kBF16, DType::kQ4_1, DType::kQ4_1, "8 w4a16 linear layers",
           {DType::kQ4_1, DType::kF32, "linear layers, w4a16 embedding and LM head, "});
}

TEST(GpuQuantizedExecutor, GgufQ4_KQwen2Bf16MatchesCpu) {
  run_gguf(true, ScalarType::kBF16, DType::kQ4_K, DType::kQ4_K, "8 w4a16 linear layers",
           {DType::kQ4_K, DType::kQ6_K, "linear layers, w4a16 embedding, w8a16 LM head, "});
}

TEST(GpuQuantizedExecutor, GgufQ4_KLlamaF16MatchesCpu) {
  run_gguf(false, ScalarType::kF16, DType::kQ4_K, DType::kQ4_K, "8 w4a16 linear layers");
}

TEST(GpuQuantizedExecutor, GgufQ5_KLlamaBf16MatchesCpu) {
  run_gguf(false, ScalarType::kBF16, DType::kQ5_K, DType::kQ5_K, "8 w8a16 linear layers");
}

TEST(GpuQuantizedExecutor, GgufQ6_KLlamaBf16MatchesCpu) {
  run_gguf(false, ScalarType::kBF16, DType::kQ6_K, DType::kQ6_K, "8 w8a16 linear layers");
}

TEST(GpuQuantizedExecutor, GgufQ8_0Qwen2Bf16MatchesCpu) {
  run_gguf(true, ScalarType::kBF16, DType::kQ8_0, DType::kQ8_0, "8 w8a16 linear layers",
           {DType::kQ8_0, DType::kQ6_K, "linear layers, w8a16 embedding and LM head, "});
}

TEST(GpuQuantizedExecutor, GgufQ5_0LlamaF16MatchesCpu) {
  run_gguf(false, ScalarType::kF16, DType::kQ5_0, DType::kQ5_0, "8 w8a16 linear layers");
}

// A Q4_K_M file's mix: Q4_K with V and down Q6_K. QKV's parts differ in type: one matrix in the
// general GGUF form (6-bit codes, group 16, Q6_K's zero folded into the min term); O and
// gate/up stay 4-bit, down 6-bit.
TEST(GpuQuantizedExecutor, GgufQ4_K_MMixLlamaBf16MatchesCpu) {
  run_gguf(false, ScalarType::kBF16, DType::kQ4_K, DType::kQ6_K, "4 w4a16 + 4 w8a16 linear layers",
           {DType::kQ4_K, DType::kF32, "linear layers, w4a16 embedding and LM head, "});
}

TEST(GpuQuantizedExecutor, Fp8LlamaBf16MatchesCpu) {
  run_quantized(false, ScalarType::kBF16, Form::kFp8, kFp8Tolerance, "8 fp8 linear layers");
}

TEST(GpuQuantizedExecutor, Fp8Qwen2Bf16MatchesCpu) {
  run_quantized(true, ScalarType::kBF16, Form::kFp8, kFp8Tolerance, "8 fp8 linear layers");
}

// The profiling pass counts the weights the device holds and the quantized layers' scratch: a
// model whose 4-bit linear layers save ~180 MB over bf16 (and whose W4A16 scratch at the token
// budget, the dequantized gate/up matrix, takes back 67 MB) gets that many more KV blocks. The
// token budget is just past the W4A16 kernel's rows, where that scratch is needed.
TEST(GpuQuantizedExecutor, ProfilingGivesTheSavedMemoryToTheKvCache) {
  PAGODA_SKIP_WITHOUT_GPU();
  ModelConfig c;
  c.architecture = "llama";
  c.num_hidden_layers = 2;
  c.hidden_size = 2048;
  c.intermediate_size = 8192;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 4;
  c.head_dim = 128;
  c.vocab_size = 1024;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = true;
  const models::CudaExecutorOptions options{
      .dtype = ScalarType::kBF16,
      .max_num_batched_tokens = kernels::kW4A16KernelMaxRows + 8,
      .max_num_seqs = 8,
      .max_model_len = 1024};
  auto profile = [&](const models::LlamaWeights& weights, std::int64_t* blocks,
                     std::size_t* weight_bytes, std::size_t* scratch_bytes,
                     std::int64_t* block_bytes) {
    auto gpu = models::CudaModelExecutor::create_from_weights(c, weights, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    auto n = (*gpu)->profile_num_kv_blocks(0.5, 16);
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    *blocks = *n;
    *weight_bytes = (*gpu)->weight_bytes();
    *scratch_bytes = (*gpu)->linear_scratch_bytes();
    *block_bytes = (*gpu)->kv_cache_bytes_per_block(16);
  };
  auto dense = models::dummy_llama_weights(c, 23u);
  ASSERT_TRUE(dense.ok()) << dense.status().to_string();
  std::int64_t dense_blocks = 0, block_bytes = 0;
  std::size_t dense_bytes = 0, dense_scratch = 0;
  profile(*dense, &dense_blocks, &dense_bytes, &dense_scratch, &block_bytes);
  EXPECT_EQ(dense_scratch, 0u);

  models::LlamaWeights int4 = *dense;
  quantize_layers(c, int4, Form::kInt4, 24u);
  std::int64_t int4_blocks = 0;
  std::size_t int4_bytes = 0, int4_scratch = 0;
  profile(int4, &int4_blocks, &int4_bytes, &int4_scratch, &block_bytes);
  // 4.125 bits against 16 per linear weight; the embedding stays bf16.
  EXPECT_LT(3 * int4_bytes, dense_bytes);
  EXPECT_GE(int4_scratch, static_cast<std::size_t>(2 * c.intermediate_size * c.hidden_size * 2));
  const double expected =
      (static_cast<double>(dense_bytes) - static_cast<double>(int4_bytes + int4_scratch)) /
      static_cast<double>(block_bytes);
  ASSERT_GT(expected, 1000.0);
  EXPECT_NEAR(static_cast<double>(int4_blocks - dense_blocks), expected, 0.25 * expected)
      << dense_blocks << " blocks dense, " << int4_blocks << " with 4-bit layers";
}

// `--quantization int4` and `fp8` on the tiny Qwen3 checkpoint (tests/data/forward/tiny_qwen3,
// head_dim 64): both executors quantize the same file at load; logits.json's prompts (1, 7 and
// 150 tokens) and one of kChunk + 7 tokens (its ids repeated), prefilled in chunks of kChunk rows
// (past kW4A16KernelMaxRows: the dequantize + cuBLASLt path; shorter chunks: the W4A16 kernel),
// then 16 greedy decode steps (one-sequence graphs: the W4A16 kernel, the FP8 layer).
void run_tiny_qwen3(quant::LoadTimeQuantization quantization, double tolerance) {
  PAGODA_SKIP_WITHOUT_GPU();
  constexpr std::int64_t kChunk = kernels::kW4A16KernelMaxRows + 8;
  constexpr std::int64_t kMaxModelLen = kChunk + 64;
  static_assert(kMaxModelLen <= 512, "tiny_qwen3 has 512 positions");
  const std::string dir =
      gpu_test::env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA_DIR) + "/forward/tiny_qwen3";
  std::ifstream in(dir + "/logits.json");
  ASSERT_TRUE(in.good()) << dir << "/logits.json is missing";
  const auto golden = nlohmann::json::parse(in);
  auto files = open_model_files(dir);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  const auto shared = std::make_shared<const ModelFiles>(std::move(*files));
  auto cpu = models::CpuModelExecutor::create(shared, {.num_threads = 2,
                                                       .max_num_batched_tokens = kChunk,
                                                       .max_model_len = kMaxModelLen,
                                                       .quantization = quantization});
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = models::CudaModelExecutor::create(shared, {.dtype = ScalarType::kBF16,
                                                        .max_num_batched_tokens = kChunk,
                                                        .max_num_seqs = 1,
                                                        .max_model_len = kMaxModelLen,
                                                        .quantization = quantization});
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  EXPECT_THAT((*gpu)->weights_summary(),
              HasSubstr(quantization == quant::LoadTimeQuantization::kFp8 ? "8 fp8" : "8 w4a16"));
  std::vector<std::vector<std::int32_t>> prompts;
  for (const auto& seq : golden["sequences"]) {
    prompts.push_back(seq["ids"].get<std::vector<std::int32_t>>());
  }
  std::vector<std::int32_t> long_prompt;
  while (static_cast<std::int64_t>(long_prompt.size()) < kChunk + 7) {
    long_prompt.insert(long_prompt.end(), prompts.back().begin(), prompts.back().end());
  }
  long_prompt.resize(static_cast<std::size_t>(kChunk + 7));
  prompts.push_back(std::move(long_prompt));
  for (const std::vector<std::int32_t>& ids : prompts) {
    SCOPED_TRACE("sequence of " + std::to_string(ids.size()) + " tokens");
    const auto max_len = static_cast<std::int64_t>(ids.size()) + 16;
    models::testing::SequenceRun cpu_run(**cpu, 16, max_len);
    models::testing::SequenceRun gpu_run(**gpu, 16, max_len);
    std::vector<float> want = cpu_run.prefill(ids, kChunk);
    std::vector<float> got = gpu_run.prefill(ids, kChunk);
    for (int step = 0; step < 16; ++step) {
      gpu_test::expect_close(got, want, tolerance, "decode step " + std::to_string(step));
      // Both continue with the CPU's token, so a near tie cannot fork the runs.
      const std::int32_t token = sampling::argmax(want);
      want = cpu_run.step(std::span(&token, 1));
      got = gpu_run.step(std::span(&token, 1));
    }
  }
}

TEST(GpuQuantizedExecutor, TinyQwen3QuantizedToInt4AtLoadMatchesCpu) {
  run_tiny_qwen3(quant::LoadTimeQuantization::kInt4, kW4A16Tolerance);
}

TEST(GpuQuantizedExecutor, TinyQwen3QuantizedToFp8AtLoadMatchesCpu) {
  run_tiny_qwen3(quant::LoadTimeQuantization::kFp8, kFp8Tolerance);
}

}  // namespace
}  // namespace pagoda
