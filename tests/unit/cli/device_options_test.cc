// --device, --dtype and --gpu-memory-utilization as `serve`, `bench` and `generate` register
// them: values from the command line and from a --config file, and the errors for bad ones. A
// bad value must fail whatever the device, so these run on machines without a GPU.
#include "cli/device_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "cli/config_file.h"

namespace pagoda::cli {
namespace {

using ::testing::HasSubstr;

struct Flags {
  std::string config;
  DeviceOptions device;
  QuantizationOptions quantization;
  CLI::App app{"test"};

  Flags() {
    app.add_option("--config", config);
    device.add_to(app);
    quantization.add_to(app);
  }

  // Parses `args`, applies --config as `pagoda serve` does, then resolves the device.
  StatusOr<engine::ExecutorOptions> apply(std::vector<std::string> args) {
    std::vector<const char*> argv = {"test"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    if (!config.empty()) PAGODA_RETURN_IF_ERROR(apply_config_file(config, app));
    engine::ExecutorOptions options;
    PAGODA_RETURN_IF_ERROR(device.apply(quantization, options));
    return options;
  }
};

std::string write_yaml(const std::string& name, const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(CliDeviceOptionsTest, DefaultsFollowTheMachine) {
  Flags flags;
  auto options = flags.apply({});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->device,
            engine::cuda_available() ? engine::Device::kCuda : engine::Device::kCpu);
  EXPECT_EQ(options->dtype, cuda::ScalarType::kBF16);
  EXPECT_DOUBLE_EQ(options->gpu_memory_utilization, 0.9);
  EXPECT_EQ(options->quantization, quant::LoadTimeQuantization::kNone);
}

TEST(CliDeviceOptionsTest, CpuTakesDtypeUtilizationAndQuantization) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu", "--dtype", "f32", "--gpu-memory-utilization",
                              "0.5", "--quantization", "int4"});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->device, engine::Device::kCpu);
  EXPECT_EQ(options->dtype, cuda::ScalarType::kF32);
  EXPECT_DOUBLE_EQ(options->gpu_memory_utilization, 0.5);
  EXPECT_EQ(options->quantization, quant::LoadTimeQuantization::kInt4);
  EXPECT_EQ(flags.device.label(engine::Device::kCpu), "cpu");
  EXPECT_EQ(flags.device.label(engine::Device::kCuda), "cuda (f32)");
}

TEST(CliDeviceOptionsTest, BadDtypeIsRefusedOnEveryDevice) {
  for (const char* device : {"cpu", ""}) {
    Flags flags;
    std::vector<std::string> args = {"--dtype", "fp64"};
    if (*device) args.insert(args.end(), {"--device", device});
    auto options = flags.apply(args);
    ASSERT_FALSE(options.ok());
    EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(options.status().message(),
                HasSubstr("--dtype must be bf16, f16 or f32, got \"fp64\""));
  }
}

TEST(CliDeviceOptionsTest, UtilizationOutsideZeroToOneIsRefused) {
  for (const char* value : {"0", "1.01", "1.5"}) {
    Flags flags;
    auto options = flags.apply({"--device", "cpu", "--gpu-memory-utilization", value});
    ASSERT_FALSE(options.ok()) << value;
    EXPECT_THAT(options.status().message(),
                HasSubstr("--gpu-memory-utilization must be in (0, 1]"));
  }
}

TEST(CliDeviceOptionsTest, UnknownDeviceIsRefused) {
  Flags flags;
  auto options = flags.apply({"--device", "gpu"});
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--device must be cuda or cpu, got \"gpu\""));
}

TEST(CliDeviceOptionsTest, CudaNeedsAGpu) {
  if (engine::cuda_available()) GTEST_SKIP() << "a GPU is visible";
  Flags flags;
  auto options = flags.apply({"--device", "cuda"});
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kUnavailable);
}

TEST(CliDeviceOptionsTest, CpuTakesAnFp16KvCache) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu", "--kv-cache-dtype", "fp16"});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->kv_cache_dtype, cpu::KvDtype::kF16);
  Flags plain;
  auto defaults = plain.apply({"--device", "cpu"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->kv_cache_dtype, cpu::KvDtype::kF32);
  Flags bad;
  auto refused = bad.apply({"--device", "cpu", "--kv-cache-dtype", "int8"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("use auto or fp16"));
}

// With a GPU: --kv-cache-dtype fp8 (or fp8_e4m3, vLLM's other name) asks for an FP8 cache; fp16
// is --dtype f16's business there, so it is refused naming what to use.
TEST(CliDeviceOptionsTest, CudaTakesAnFp8KvCache) {
  if (!engine::cuda_available()) GTEST_SKIP() << "needs a GPU to resolve --device cuda";
  for (const char* name : {"fp8", "fp8_e4m3"}) {
    Flags flags;
    auto options = flags.apply({"--device", "cuda", "--kv-cache-dtype", name});
    ASSERT_TRUE(options.ok()) << options.status().to_string();
    EXPECT_TRUE(options->fp8_kv_cache) << name;
  }
  Flags plain;
  auto defaults = plain.apply({"--device", "cuda"});
  ASSERT_TRUE(defaults.ok());
  EXPECT_FALSE(defaults->fp8_kv_cache);
  Flags fp16;
  auto refused = fp16.apply({"--device", "cuda", "--kv-cache-dtype", "fp16"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(refused.status().message(), HasSubstr("--dtype f16"));
}

// The CPU keeps fp32 or fp16 caches: fp8 is refused naming the ones it has.
TEST(CliDeviceOptionsTest, CpuRefusesAnFp8KvCache) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu", "--kv-cache-dtype", "fp8"});
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kUnimplemented);
  EXPECT_THAT(options.status().message(), HasSubstr("auto or fp16"));
}

// --cpu-activations sets the CPU kernels' process-wide rounding (cpu_features.h) when the device
// is the CPU; auto leaves the environment's choice; an unknown value is refused naming the others.
TEST(CliDeviceOptionsTest, CpuActivationsSetTheKernelsRounding) {
  if (!cpu::cpu_has_avx2()) GTEST_SKIP() << "int16 and int8 activations need AVX2";
  const cpu::CpuActivations asked = cpu::cpu_activations();
  for (const auto& [name, want] : {std::pair{"int8", cpu::CpuActivations::kInt8},
                                   std::pair{"fp32", cpu::CpuActivations::kFp32},
                                   std::pair{"int16", cpu::CpuActivations::kInt16}}) {
    Flags flags;
    auto options = flags.apply({"--device", "cpu", "--cpu-activations", name});
    ASSERT_TRUE(options.ok()) << options.status().to_string();
    EXPECT_EQ(cpu::cpu_activations(), want) << name;
  }
  EXPECT_FALSE(cpu::cpu_int8_activations());
  cpu::set_cpu_activations(cpu::CpuActivations::kInt8);
  Flags plain;
  ASSERT_TRUE(plain.apply({"--device", "cpu"}).ok());
  EXPECT_TRUE(cpu::cpu_int8_activations()) << "auto keeps what was set";
  cpu::set_cpu_activations(asked);
  Flags bad;
  auto refused = bad.apply({"--device", "cpu", "--cpu-activations", "int4"});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("auto, int16, int8 or fp32"));
}

TEST(CliDeviceOptionsTest, ConfigFileTakesTheSameKeys) {
  Flags flags;
  const std::string path = write_yaml("pagoda-device-options-test.yaml",
                                      "device: cpu\ndtype: f16\ngpu_memory_utilization: 0.75\n");
  auto options = flags.apply({"--config", path});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->device, engine::Device::kCpu);
  EXPECT_EQ(options->dtype, cuda::ScalarType::kF16);
  EXPECT_DOUBLE_EQ(options->gpu_memory_utilization, 0.75);
  std::filesystem::remove(path);
}

TEST(CliDeviceOptionsTest, ConfigFileBadDtypeIsRefused) {
  Flags flags;
  const std::string path =
      write_yaml("pagoda-device-options-bad-test.yaml", "device: cpu\ndtype: int8\n");
  auto options = flags.apply({"--config", path});
  ASSERT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("--dtype must be bf16, f16 or f32"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace pagoda::cli
