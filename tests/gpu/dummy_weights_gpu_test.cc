// --load-format dummy gives both executors the same weights: the CUDA executor's bf16 tensors,
// drawn on the device, against the CPU's (models/llama_weights.h), drawn on the host from the
// same seed with the same per-element hash (backend/random_fill_draw.h). Bit for bit, fused
// QKV and gate/up included, so a CPU run of a dummy config is the oracle of the GPU's. With
// --quantization fp8 / int4 the linear layers are the host's quantized draws on both sides, and
// the CUDA executor (FP8 W8A8 / W4A16 layers) is held to the CPU executor on them.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/hf_config.h"
#include "models/cpu_model_executor.h"
#include "models/cuda_llama_weights.h"
#include "models/cuda_model_executor.h"
#include "models/llama_weights.h"
#include "sampling/sampler.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/unit/models/model_test_util.h"

namespace pagoda::models {
namespace {

// Qwen2-shaped (QKV bias), untied, with llama3 RoPE scaling: every tensor kind is drawn.
ModelConfig tiny_config() {
  auto config = model_config_from_hf_json(R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 96, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 6, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 256},
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2
  })",
                                          "tiny.json");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig{};
}

std::vector<std::uint16_t> to_host(const cuda::DeviceBuffer& buffer) {
  std::vector<std::uint16_t> out(buffer.bytes() / sizeof(std::uint16_t));
  EXPECT_EQ(cudaMemcpy(out.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

// A dense linear layer's matrix (dummy weights are always dense).
std::vector<std::uint16_t> to_host(const CudaLinearLayer& layer) {
  EXPECT_EQ(layer.kind(), DeviceLinearKind::kDense);
  std::vector<std::uint16_t> out(layer.device_bytes() / sizeof(std::uint16_t));
  EXPECT_EQ(
      cudaMemcpy(out.data(), layer.dense_weight(), layer.device_bytes(), cudaMemcpyDeviceToHost),
      cudaSuccess);
  return out;
}

// The host matrices `views`, concatenated (they are row blocks of one device tensor).
std::vector<std::uint16_t> rows_of(std::initializer_list<cpu::TensorView> views) {
  std::vector<std::uint16_t> out;
  for (const cpu::TensorView& v : views) {
    const auto* data = static_cast<const std::uint16_t*>(v.data);
    out.insert(out.end(), data, data + v.num_rows * v.num_cols);
  }
  return out;
}

// A host fp32 vector holding bf16 values, as bf16 bits.
std::vector<std::uint16_t> bf16_bits(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<std::uint16_t> out;
  for (const std::vector<float>* part : parts) {
    for (const float x : *part) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, &x, sizeof(bits));
      EXPECT_EQ(bits & 0xFFFFu, 0u) << x << " is not a bf16 value";
      out.push_back(static_cast<std::uint16_t>(bits >> 16));
    }
  }
  return out;
}

TEST(DummyWeightsGpuTest, CudaBf16WeightsAreTheCpusBitForBit) {
  PAGODA_SKIP_WITHOUT_GPU();
  const ModelConfig config = tiny_config();
  constexpr std::uint64_t kSeed = 11;
  auto host = dummy_llama_weights(config, kSeed);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  auto device = dummy_llama_weights(config, cuda::ScalarType::kBF16, kSeed);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  EXPECT_EQ(to_host(device->embed_tokens), rows_of({host->embed_tokens}));
  ASSERT_EQ(device->layers.size(), host->layers.size());
  for (std::size_t i = 0; i < host->layers.size(); ++i) {
    const LlamaLayerWeights& h = host->layers[i];
    const CudaLayerWeights& d = device->layers[i];
    EXPECT_EQ(to_host(d.input_layernorm), bf16_bits({&h.input_layernorm})) << "layer " << i;
    EXPECT_EQ(to_host(d.qkv_proj), rows_of({h.q_proj, h.k_proj, h.v_proj})) << "layer " << i;
    EXPECT_EQ(to_host(d.qkv_bias), bf16_bits({&h.q_bias, &h.k_bias, &h.v_bias})) << "layer " << i;
    EXPECT_EQ(to_host(d.o_proj), rows_of({h.o_proj})) << "layer " << i;
    EXPECT_EQ(to_host(d.post_attention_layernorm), bf16_bits({&h.post_attention_layernorm}))
        << "layer " << i;
    EXPECT_EQ(to_host(d.gate_up_proj), rows_of({h.gate_proj, h.up_proj})) << "layer " << i;
    EXPECT_EQ(to_host(d.down_proj), rows_of({h.down_proj})) << "layer " << i;
  }
  EXPECT_EQ(to_host(device->norm), bf16_bits({&host->norm}));
  EXPECT_EQ(to_host(device->lm_head), rows_of({host->lm_head}));
  std::vector<float> inv_freq(host->rope_inv_freq.size());
  ASSERT_EQ(device->inv_freq.bytes(), inv_freq.size() * sizeof(float));
  ASSERT_EQ(cudaMemcpy(inv_freq.data(), device->inv_freq.data(), device->inv_freq.bytes(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(inv_freq, host->rope_inv_freq);
}

// Gemma 3's extra weights (cuda_gemma3_weights.h: sandwich norms drawn after every other
// tensor, the sliding layers' RoPE table) are the CPU's too.
TEST(DummyWeightsGpuTest, Gemma3SandwichNormsAndLocalRopeAreTheCpus) {
  PAGODA_SKIP_WITHOUT_GPU();
  auto config = model_config_from_hf_json(R"({
    "model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 144,
    "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 256,
    "vocab_size": 416, "max_position_embeddings": 512, "sliding_window": 12,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention"],
    "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
  })",
                                          "gemma.json");
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  constexpr std::uint64_t kSeed = 5;
  auto host = dummy_llama_weights(*config, kSeed);
  ASSERT_TRUE(host.ok()) << host.status().to_string();
  auto device = dummy_llama_weights(*config, cuda::ScalarType::kBF16, kSeed);
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  ASSERT_EQ(device->gemma3.layers.size(), host->layers.size());
  for (std::size_t i = 0; i < host->layers.size(); ++i) {
    const LlamaLayerWeights& h = host->layers[i];
    const CudaGemma3LayerWeights& d = device->gemma3.layers[i];
    EXPECT_EQ(to_host(d.pre_feedforward_layernorm), bf16_bits({&h.pre_feedforward_layernorm}))
        << "layer " << i;
    EXPECT_EQ(to_host(d.post_feedforward_layernorm), bf16_bits({&h.post_feedforward_layernorm}))
        << "layer " << i;
    EXPECT_EQ(to_host(device->layers[i].q_norm), bf16_bits({&h.q_norm})) << "layer " << i;
  }
  EXPECT_EQ(to_host(device->norm), bf16_bits({&host->norm}));
  std::vector<float> local(host->rope_local_inv_freq.size());
  ASSERT_EQ(device->gemma3.local_inv_freq.bytes(), local.size() * sizeof(float));
  ASSERT_EQ(cudaMemcpy(local.data(), device->gemma3.local_inv_freq.data(), local.size() * 4,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(local, host->rope_local_inv_freq);
}

// Llama-shaped, head_dim 64 (a CUDA size), every in_features a multiple of 32 and 128.
ModelConfig quantizable_config() {
  auto config = model_config_from_hf_json(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 256, "intermediate_size": 384, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2
  })",
                                          "quantizable.json");
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig{};
}

// --load-format dummy --quantization fp8 / int4: the CUDA executor's layers are FP8 / W4A16
// (weights_summary), and its logits follow the CPU executor's over the same quantized dummy
// weights through a chunked prefill and 12 greedy decode steps (graph replays), within the
// bounds of gpu_quantized_executor_test (its header derives them): W4A16 5e-2, FP8 W8A8 0.25
// (activations rounded to e4m3 per token). A second CUDA executor from the same seed gives the
// same logits bit for bit.
void run_quantized_dummy(quant::LoadTimeQuantization quantization, double tolerance,
                         const std::string& kind) {
  PAGODA_SKIP_WITHOUT_GPU();
  const ModelConfig config = quantizable_config();
  constexpr std::uint64_t kSeed = 3;
  auto files = std::make_shared<ModelFiles>();
  files->path = "quantizable.json";
  files->config = config;
  auto cpu = CpuModelExecutor::create_dummy(
      files, {.num_threads = 2, .max_num_batched_tokens = 64, .quantization = quantization}, kSeed);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  const CudaExecutorOptions options{.dtype = cuda::ScalarType::kBF16,
                                    .max_num_batched_tokens = 64,
                                    .max_num_seqs = 1,
                                    .max_model_len = 256,
                                    .quantization = quantization};
  auto gpu = CudaModelExecutor::create_dummy(config, options, kSeed);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  // The second executor's FP8 layers quantize their own inputs: the producers' fused codes
  // must give the same bits.
  CudaExecutorOptions unfused = options;
  unfused.fuse_fp8_producers = false;
  auto again = CudaModelExecutor::create_dummy(config, unfused, kSeed);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_THAT((*gpu)->weights_summary(), ::testing::HasSubstr("8 " + kind + " linear layers"));

  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 900);
  testing::SequenceRun cpu_run(**cpu, 16, 128);
  testing::SequenceRun gpu_run(**gpu, 16, 128);
  testing::SequenceRun again_run(**again, 16, 128);
  std::vector<float> want = cpu_run.prefill(prompt, 64);
  std::vector<float> got = gpu_run.prefill(prompt, 64);
  std::vector<float> repeat = again_run.prefill(prompt, 64);
  for (int step = 0; step < 12; ++step) {
    gpu_test::expect_close(got, want, tolerance, kind + " step " + std::to_string(step));
    EXPECT_EQ(repeat, got) << kind << " step " << step
                           << ": not deterministic, or the fused FP8 codes differ";
    const std::int32_t token = sampling::argmax(want);  // all follow the CPU's tokens
    want = cpu_run.step(std::span(&token, 1));
    got = gpu_run.step(std::span(&token, 1));
    repeat = again_run.step(std::span(&token, 1));
  }
}

TEST(DummyWeightsGpuTest, Fp8DummyExecutorMatchesTheCpus) {
  run_quantized_dummy(quant::LoadTimeQuantization::kFp8, 0.25, "fp8");
}

TEST(DummyWeightsGpuTest, Int4DummyExecutorMatchesTheCpus) {
  run_quantized_dummy(quant::LoadTimeQuantization::kInt4, 5e-2, "w4a16");
}

}  // namespace
}  // namespace pagoda::models
