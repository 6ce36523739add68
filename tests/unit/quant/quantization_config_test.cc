#include "model/quantization_config.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda {
namespace {

StatusOr<QuantizationConfig> parse(const std::string& quantization_config) {
  return quantization_config_from_hf_json(
      R"({"model_type": "llama", "quantization_config": )" + quantization_config + "}",
      "config.json");
}

void expect_error(const std::string& json, const std::string& fragment) {
  StatusOr<QuantizationConfig> q = parse(json);
  ASSERT_FALSE(q.ok()) << json;
  EXPECT_NE(q.status().message().find(fragment), std::string::npos) << q.status().message();
}

TEST(QuantizationConfig, AbsentMeansNone) {
  StatusOr<QuantizationConfig> q = quantization_config_from_hf_json(R"({"a": 1})", "config.json");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->method, QuantizationMethod::kNone);
  EXPECT_EQ(q->summary(), "none");
}

TEST(QuantizationConfig, Gptq) {
  StatusOr<QuantizationConfig> q = parse(
      R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": false, "desc_act": true,
          "checkpoint_format": "gptq"})");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->method, QuantizationMethod::kGptq);
  EXPECT_EQ(q->group_size, 128);
  EXPECT_FALSE(q->symmetric);
  EXPECT_TRUE(q->desc_act);
  EXPECT_TRUE(q->zeros_stored_minus_one);
  EXPECT_EQ(q->summary(), "gptq 4-bit, group 128, asym, act-order");
  StatusOr<QuantizationConfig> v2 =
      parse(R"({"quant_method": "gptq", "bits": 4, "group_size": -1, "format": "gptq_v2"})");
  ASSERT_TRUE(v2.ok());
  EXPECT_FALSE(v2->zeros_stored_minus_one);
  EXPECT_EQ(v2->summary(), "gptq 4-bit, per channel, sym");
}

TEST(QuantizationConfig, Awq) {
  StatusOr<QuantizationConfig> q =
      parse(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
                "version": "GEMM"})");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->method, QuantizationMethod::kAwq);
  EXPECT_EQ(q->group_size, 64);
}

TEST(QuantizationConfig, Fp8) {
  StatusOr<QuantizationConfig> ct = parse(R"({"quant_method": "compressed-tensors",
      "format": "float-quantized", "ignore": ["lm_head"],
      "config_groups": {"group_0": {"targets": ["Linear"],
          "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true},
          "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                "dynamic": true}}}})");
  ASSERT_TRUE(ct.ok()) << ct.status().to_string();
  EXPECT_EQ(ct->method, QuantizationMethod::kCompressedTensorsFp8);
  EXPECT_EQ(ct->fp8_strategy, Fp8ScaleStrategy::kChannel);
  EXPECT_EQ(ct->ignored_modules, std::vector<std::string>{"lm_head"});
  StatusOr<QuantizationConfig> block = parse(
      R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})");
  ASSERT_TRUE(block.ok()) << block.status().to_string();
  EXPECT_EQ(block->fp8_strategy, Fp8ScaleStrategy::kBlock);
  EXPECT_EQ(block->summary(), "fp8 E4M3, 128x128 block scales");
}

// llm-compressor's calibrated FP8 KV cache: per-tensor, static; the layers carry k_scale /
// v_scale (read by the loader, kv_cache_scales_test).
TEST(QuantizationConfig, KvCacheScheme) {
  const std::string fp8_weights = R"("quant_method": "compressed-tensors",
      "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
          "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}})";
  StatusOr<QuantizationConfig> q = parse("{" + fp8_weights + R"(, "kv_cache_scheme":
      {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false,
       "symmetric": true}})");
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_TRUE(q->fp8_kv_cache);
  EXPECT_EQ(q->summary(),
            "compressed-tensors E4M3, per-channel scales, FP8 KV cache (per-tensor scales)");
  EXPECT_EQ(q->weights_summary(), "compressed-tensors E4M3, per-channel scales");
  StatusOr<QuantizationConfig> none = parse("{" + fp8_weights + R"(, "kv_cache_scheme": null})");
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->fp8_kv_cache);
  expect_error(
      "{" + fp8_weights +
          R"(, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "attn_head"}})",
      "\"quantization_config.kv_cache_scheme.strategy\" = \"attn_head\"");
  expect_error("{" + fp8_weights + R"(, "kv_cache_scheme": {"num_bits": 8, "type": "int"}})",
               "kv_cache_scheme.num_bits");
  expect_error("{" + fp8_weights +
                   R"(, "kv_cache_scheme": {"num_bits": 8, "type": "float", "dynamic": true}})",
               "kv_cache_scheme.dynamic");
}

TEST(QuantizationConfig, UnsupportedVariantsNameTheKey) {
  expect_error(R"({"quant_method": "gptq", "bits": 8, "group_size": 128})",
               "\"quantization_config.bits\" = 8");
  expect_error(R"({"quant_method": "gptq", "bits": 3})", "\"quantization_config.bits\" = 3");
  expect_error(R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})",
               "\"quantization_config.checkpoint_format\" = \"marlin\"");
  expect_error(R"({"quant_method": "gptq", "bits": 4, "is_marlin_format": true})",
               "is_marlin_format");
  expect_error(R"({"quant_method": "gptq", "bits": 4, "group_size": 48})",
               "\"quantization_config.group_size\" = 48");
  expect_error(R"({"quant_method": "awq", "bits": 4, "version": "gemv"})",
               "\"quantization_config.version\" = \"gemv\"");
  expect_error(R"({"quant_method": "awq", "bits": 4, "zero_point": false})", "zero_point");
  expect_error(R"({"quant_method": "bitsandbytes"})", "quant_method");
  expect_error(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                   "config_groups": {}})",
               "pack-quantized");
  expect_error(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights":
                   {"num_bits": 4, "type": "int", "strategy": "group"}}}})",
               "config_groups.g.weights.num_bits");
  expect_error(R"({"quant_method": "fp8", "weight_block_size": [128, 48]})", "weight_block_size");
  expect_error(R"({"quant_method": "gptq", "bits": "4"})", "must be an integer");
}

}  // namespace
}  // namespace pagoda
