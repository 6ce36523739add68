// Checkpoint KV-cache scales: an FP8 checkpoint from llm-compressor carries `kv_cache_scheme` in
// quantization_config and one k_scale / v_scale per attention block (older exports
// k_proj.output_scale / v_proj.output_scale, or one kv_scale for both). The test writes such a
// checkpoint itself: tests/data/forward/tiny_llama's tensors, a second shard of scales, an index
// and a config.json with the scheme, then reads the per-layer scales back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/model_engine.h"
#include "model/model_files.h"
#include "models/llama_weights.h"

namespace pagoda::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

const fs::path kTinyLlama = fs::path(PAGODA_TEST_DATA_DIR) / "forward" / "tiny_llama";

// One scalar scale tensor: F32 of shape [] or [1], or BF16 (the upper half of the fp32 bits).
struct Scale {
  std::string name;
  float value = 1.0f;
  bool bf16 = false;
  bool shape_one = false;
};

void write_safetensors(const fs::path& path, const std::vector<Scale>& scales) {
  json header = json::object();
  std::vector<std::uint8_t> data;
  for (const Scale& s : scales) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &s.value, sizeof(bits));
    const std::size_t begin = data.size();
    if (s.bf16) {
      data.push_back(static_cast<std::uint8_t>(bits >> 16));
      data.push_back(static_cast<std::uint8_t>(bits >> 24));
    } else {
      for (int i = 0; i < 4; ++i) data.push_back(static_cast<std::uint8_t>(bits >> (8 * i)));
    }
    header[s.name] = {{"dtype", s.bf16 ? "BF16" : "F32"},
                      {"shape", s.shape_one ? json::array({1}) : json::array()},
                      {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream out(path, std::ios::binary);
  const std::uint64_t length = text.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out << text;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// The tensor names of a safetensors file.
std::vector<std::string> tensor_names(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof(length));
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  const json header = json::parse(text);
  std::vector<std::string> names;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") names.push_back(name);
  }
  return names;
}

// tiny_llama (3 layers) plus `scales` in a second shard, with `kv_cache_scheme` (or none) in a
// compressed-tensors quantization_config (its tensors stay F32: the loader goes by the tensors).
fs::path write_checkpoint(const std::string& name, const std::vector<Scale>& scales,
                          const json& kv_cache_scheme) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kTinyLlama / "model.safetensors", dir / "model-00001-of-00002.safetensors");
  write_safetensors(dir / "model-00002-of-00002.safetensors", scales);
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  for (const std::string& t : tensor_names(kTinyLlama / "model.safetensors")) {
    index["weight_map"][t] = "model-00001-of-00002.safetensors";
  }
  for (const Scale& s : scales) index["weight_map"][s.name] = "model-00002-of-00002.safetensors";
  std::ofstream(dir / "model.safetensors.index.json") << index.dump();
  std::ifstream in(kTinyLlama / "config.json");
  json config = json::parse(in);
  config["quantization_config"] = {
      {"quant_method", "compressed-tensors"},
      {"format", "float-quantized"},
      {"config_groups",
       {{"group_0",
         {{"targets", {"Linear"}},
          {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}}}}}}},
      {"ignore", {"lm_head"}}};
  if (!kv_cache_scheme.is_null())
    config["quantization_config"]["kv_cache_scheme"] = kv_cache_scheme;
  std::ofstream(dir / "config.json") << config.dump(2);
  return dir;
}

const json kScheme = {{"num_bits", 8},
                      {"type", "float"},
                      {"strategy", "tensor"},
                      {"dynamic", false},
                      {"symmetric", true}};

TEST(KvCacheScalesTest, EachLayerGetsItsScalesUnderEveryName) {
  const fs::path dir = write_checkpoint(
      "pagoda_kv_scales",
      {{"model.layers.0.self_attn.k_scale", 0.5f},
       {"model.layers.0.self_attn.v_scale", 0.25f, /*bf16=*/false, /*shape_one=*/true},
       {"model.layers.1.self_attn.k_proj.output_scale", 2.0f, /*bf16=*/true},
       {"model.layers.1.self_attn.v_proj.output_scale", 0.0625f, false, true},
       {"model.layers.2.self_attn.kv_scale", 0.125f}},
      kScheme);
  auto files = open_model_files(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  EXPECT_TRUE(files->quantization.fp8_kv_cache);
  EXPECT_THAT(files->quantization.summary(), HasSubstr("FP8 KV cache (per-tensor scales)"));
  auto weights = load_llama_weights(*files);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  ASSERT_EQ(weights->layers.size(), 3u);
  EXPECT_EQ(weights->layers[0].k_scale, 0.5f);
  EXPECT_EQ(weights->layers[0].v_scale, 0.25f);
  EXPECT_EQ(weights->layers[1].k_scale, 2.0f);  // bf16
  EXPECT_EQ(weights->layers[1].v_scale, 0.0625f);
  EXPECT_EQ(weights->layers[2].k_scale, 0.125f);  // one kv_scale for both
  EXPECT_EQ(weights->layers[2].v_scale, 0.125f);
}

// Without scales (a checkpoint that did not calibrate them, or any unquantized model) every layer
// keeps 1, vLLM's default; k_scale wins over the older names where both are stored.
TEST(KvCacheScalesTest, MissingScalesAreOneAndNewNamesWin) {
  const fs::path dir = write_checkpoint("pagoda_kv_scales_partial",
                                        {{"model.layers.1.self_attn.k_scale", 3.0f},
                                         {"model.layers.1.self_attn.k_proj.output_scale", 5.0f},
                                         {"model.layers.1.self_attn.kv_scale", 7.0f}},
                                        json());
  auto files = open_model_files(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  EXPECT_FALSE(files->quantization.fp8_kv_cache);
  auto weights = load_llama_weights(*files);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  EXPECT_EQ(weights->layers[0].k_scale, 1.0f);
  EXPECT_EQ(weights->layers[0].v_scale, 1.0f);
  EXPECT_EQ(weights->layers[1].k_scale, 3.0f);
  EXPECT_EQ(weights->layers[1].v_scale, 7.0f);
  EXPECT_EQ(weights->layers[2].k_scale, 1.0f);

  auto plain = open_model_files(kTinyLlama.string());
  ASSERT_TRUE(plain.ok());
  auto plain_weights = load_llama_weights(*plain);
  ASSERT_TRUE(plain_weights.ok());
  for (const LlamaLayerWeights& layer : plain_weights->layers) {
    EXPECT_EQ(layer.k_scale, 1.0f);
    EXPECT_EQ(layer.v_scale, 1.0f);
  }
}

TEST(KvCacheScalesTest, BadScalesAreRefusedNamingTheTensor) {
  const fs::path dir =
      write_checkpoint("pagoda_kv_scales_bad", {{"model.layers.2.self_attn.v_scale", -1.0f}}, {});
  auto files = open_model_files(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  auto weights = load_llama_weights(*files);
  ASSERT_FALSE(weights.ok());
  EXPECT_THAT(weights.status().message(), HasSubstr("model.layers.2.self_attn.v_scale"));
  EXPECT_THAT(weights.status().message(), HasSubstr("positive"));
}

// --kv-cache-dtype auto follows the checkpoint's kv_cache_scheme: an FP8 cache on CUDA, the CPU's
// own cache on the CPU (which has no FP8 cache); an explicit choice is left alone.
TEST(KvCacheScalesTest, AutoSelectsFp8OnCudaAndTheCpusOwnCacheOnTheCpu) {
  const fs::path dir = write_checkpoint("pagoda_kv_scales_auto",
                                        {{"model.layers.0.self_attn.k_scale", 0.5f}}, kScheme);
  auto files = open_model_files(dir.string());
  ASSERT_TRUE(files.ok()) << files.status().to_string();

  engine::ExecutorOptions cuda{.device = engine::Device::kCuda};
  ASSERT_TRUE(engine::resolve_kv_cache_dtype(*files, cuda).ok());
  EXPECT_TRUE(cuda.fp8_kv_cache);

  engine::ExecutorOptions on_cpu{.device = engine::Device::kCpu};
  ASSERT_TRUE(engine::resolve_kv_cache_dtype(*files, on_cpu).ok());
  EXPECT_FALSE(on_cpu.fp8_kv_cache);
  EXPECT_EQ(on_cpu.kv_cache_dtype, cpu::KvDtype::kF32);

  engine::ExecutorOptions cpu_fp16{.device = engine::Device::kCpu,
                                   .kv_cache_dtype = cpu::KvDtype::kF16};
  EXPECT_TRUE(engine::resolve_kv_cache_dtype(*files, cpu_fp16).ok());
  EXPECT_EQ(cpu_fp16.kv_cache_dtype, cpu::KvDtype::kF16);

  auto plain = open_model_files(kTinyLlama.string());
  ASSERT_TRUE(plain.ok());
  engine::ExecutorOptions cuda_plain{.device = engine::Device::kCuda};
  ASSERT_TRUE(engine::resolve_kv_cache_dtype(*plain, cuda_plain).ok());
  EXPECT_FALSE(cuda_plain.fp8_kv_cache);
  engine::ExecutorOptions cpu_plain{.device = engine::Device::kCpu};
  EXPECT_TRUE(engine::resolve_kv_cache_dtype(*plain, cpu_plain).ok());
}

}  // namespace
}  // namespace pagoda::models
