// Opening a model on a device: the device rule, and the refusals that must come before any
// weight is loaded. The CUDA executor itself is tested on a GPU (tests/gpu, and
// scripts/gpu_engine_check.sh end to end); here only what holds on any machine.
#include "engine/model_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace pagoda::engine {
namespace {

using ::testing::HasSubstr;

const std::string kModelPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(EngineResolveDeviceTest, EmptyPicksCudaOnlyWhenAGpuIsThere) {
  auto device = resolve_device("");
  ASSERT_TRUE(device.ok()) << device.status().to_string();
  EXPECT_EQ(*device, cuda_available() ? Device::kCuda : Device::kCpu);
}

TEST(EngineResolveDeviceTest, CpuIsAlwaysThere) {
  auto device = resolve_device("cpu");
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(*device, Device::kCpu);
  EXPECT_EQ(device_name(Device::kCpu), "cpu");
  EXPECT_EQ(device_name(Device::kCuda), "cuda");
}

TEST(EngineResolveDeviceTest, UnknownNameIsInvalid) {
  auto device = resolve_device("tpu");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(device.status().message(), HasSubstr("--device must be cuda or cpu, got \"tpu\""));
}

TEST(EngineResolveDeviceTest, CudaWithoutAGpuIsUnavailable) {
  auto device = resolve_device("cuda");
  if (cuda_available()) {
    ASSERT_TRUE(device.ok());
    EXPECT_EQ(*device, Device::kCuda);
    return;
  }
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), StatusCode::kUnavailable);
#if PAGODA_HAVE_CUDA
  EXPECT_THAT(device.status().message(), HasSubstr("no CUDA device is visible"));
#else
  EXPECT_THAT(device.status().message(), HasSubstr("built without CUDA"));
#endif
}

TEST(EngineDeviceSupportTest, CpuRunsEverything) {
  EXPECT_TRUE(check_device_support({.device = Device::kCpu,
                                    .quantization = quant::LoadTimeQuantization::kInt4,
                                    .dtype = cuda::ScalarType::kF32})
                  .ok());
}

// --quantization fp8 / int4 run on CUDA as FP8 and W4A16 layers (GpuQuantizedExecutor), which
// take 16-bit activations; what they cannot run is refused naming the flags and the way out.
TEST(EngineDeviceSupportTest, CudaQuantizesAtLoadWith16BitActivations) {
  for (const auto q : {quant::LoadTimeQuantization::kNone, quant::LoadTimeQuantization::kFp8,
                       quant::LoadTimeQuantization::kInt4}) {
    for (const auto dtype : {cuda::ScalarType::kBF16, cuda::ScalarType::kF16}) {
      EXPECT_TRUE(
          check_device_support({.device = Device::kCuda, .quantization = q, .dtype = dtype}).ok());
    }
  }
  EXPECT_TRUE(
      check_device_support({.device = Device::kCuda, .dtype = cuda::ScalarType::kF32}).ok());

  Status s = check_device_support({.device = Device::kCuda,
                                   .quantization = quant::LoadTimeQuantization::kFp8,
                                   .dtype = cuda::ScalarType::kF32});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("--quantization fp8"));
  EXPECT_THAT(s.message(), HasSubstr("--dtype bf16 or f16"));
  EXPECT_THAT(s.message(), HasSubstr("add --device cpu"));

  // Dummy weights are quantized at load as a checkpoint's would be.
  EXPECT_TRUE(check_device_support({.device = Device::kCuda,
                                    .quantization = quant::LoadTimeQuantization::kInt4,
                                    .load_format = LoadFormat::kDummy})
                  .ok());
}

// Checked before the weights load (minutes for a large model), whatever the machine has.
TEST(EngineOpenExecutorTest, CudaRefusesABadUtilizationFirst) {
  for (const double utilization : {0.0, -0.5, 1.5}) {
    auto opened =
        open_executor(std::make_shared<const ModelFiles>(),
                      {.device = Device::kCuda, .gpu_memory_utilization = utilization}, {});
    ASSERT_FALSE(opened.ok());
    EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(opened.status().message(), HasSubstr("--gpu-memory-utilization"));
  }
}

TEST(EngineOpenExecutorTest, CudaWithoutAGpuIsUnavailable) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is visible";
  auto opened = open_executor(std::make_shared<const ModelFiles>(), {.device = Device::kCuda}, {});
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
}

class OpenEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModelPath)) {
      GTEST_SKIP() << kModelPath << " is absent: run scripts/setup.sh to fetch the default model";
    }
  }

  static EngineOptions options(Device device) {
    EngineOptions o;
    o.model_path = kModelPath;
    o.executor = {.device = device, .num_threads = 2};
    o.engine.scheduler.max_model_len = 256;
    o.engine.scheduler.max_num_seqs = 4;
    o.engine.scheduler.max_num_batched_tokens = 64;
    o.engine.kv_cache_memory_bytes = std::int64_t{16} << 20;
    return o;
  }
};

// Speculative decoding runs on CUDA too: without a GPU the only refusal is the missing device.
TEST_F(OpenEngineTest, CudaTakesSpeculation) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is visible (tests/gpu/speculative_gpu_test.cc)";
  EngineOptions o = options(Device::kCuda);
  o.engine.speculative = spec::SpeculativeConfig{};
  auto client = open_engine(std::move(o));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
}

TEST_F(OpenEngineTest, CudaWithoutAGpuIsUnavailable) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is visible";
  auto client = open_engine(options(Device::kCuda));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
}

// The CPU pool follows --kv-cache-memory (engine_config.h), and the executor takes the
// engine's limits.
TEST_F(OpenEngineTest, CpuEngineTakesTheLimitsAndTheBudget) {
  auto client = open_engine(options(Device::kCpu));
  ASSERT_TRUE(client.ok()) << client.status().to_string();
  const EngineConfig& config = (*client)->config();
  EXPECT_EQ(config.scheduler.max_num_seqs, 4);
  EXPECT_EQ(config.scheduler.max_num_batched_tokens, 64);
  EXPECT_EQ(config.scheduler.max_model_len, 256);
  EXPECT_GT(config.cache.num_blocks, 0);
  EXPECT_EQ((*client)->stats().num_kv_blocks, config.cache.num_blocks);
}

}  // namespace
}  // namespace pagoda::engine
