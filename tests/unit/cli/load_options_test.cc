// --load-format, --tokenizer and --enforce-eager as `serve`, `bench` and `generate` register
// them: parsing, opening the model and tokenizer they name, and the error for each bad value.
#include "cli/load_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/device_options.h"

namespace pagoda::cli {
namespace {

using ::testing::HasSubstr;

const std::string kGguf =
    std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Flags {
  DeviceOptions device;
  LoadOptions load;
  QuantizationOptions quantization;
  CLI::App app{"test"};

  Flags() {
    device.add_to(app);
    load.add_to(app);
    quantization.add_to(app);
  }

  StatusOr<engine::ExecutorOptions> apply(std::vector<std::string> args) {
    std::vector<const char*> argv = {"test"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    engine::ExecutorOptions options;
    PAGODA_RETURN_IF_ERROR(load.apply(options));
    PAGODA_RETURN_IF_ERROR(device.apply(quantization, options));
    return options;
  }
};

// A config.json of `vocab` tokens in a fresh folder; returns the folder.
std::string write_config(const std::string& name, int vocab) {
  const auto dir = std::filesystem::temp_directory_path() / name;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
             "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
             "vocab_size": )"
      << vocab << "}";
  return dir.string();
}

class LoadOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kGguf)) GTEST_SKIP() << kGguf << " is absent";
  }
};

TEST(LoadOptionsFlagsTest, DefaultsAreAutoTheModelsTokenizerAndGraphs) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu"});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->load_format, engine::LoadFormat::kAuto);
  EXPECT_FALSE(options->enforce_eager);
  EXPECT_EQ(flags.load.tokenizer, "");
}

TEST(LoadOptionsFlagsTest, DummyAndEnforceEagerAreTaken) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu", "--load-format", "dummy", "--enforce-eager"});
  ASSERT_TRUE(options.ok()) << options.status().to_string();
  EXPECT_EQ(options->load_format, engine::LoadFormat::kDummy);
  EXPECT_TRUE(options->enforce_eager);
}

TEST(LoadOptionsFlagsTest, UnknownLoadFormatIsAClearError) {
  Flags flags;
  auto options = flags.apply({"--device", "cpu", "--load-format", "bogus"});
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(),
              HasSubstr("--load-format must be auto or dummy, got \"bogus\""));
}

TEST(LoadOptionsFlagsTest, TokenizerPointingAtNothingIsNotFound) {
  LoadOptions load{.tokenizer = "/nonexistent/tokenizer"};
  auto opened = load.open(write_config("pagoda_load_nothing", 1000), engine::LoadFormat::kDummy);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(opened.status().message(), HasSubstr("--tokenizer /nonexistent/tokenizer"));
  EXPECT_THAT(opened.status().message(), HasSubstr("no such file or folder"));
}

TEST(LoadOptionsFlagsTest, TokenizerFolderWithoutTokenizerJsonIsNotFound) {
  const std::string empty = (std::filesystem::temp_directory_path() / "pagoda_load_empty").string();
  std::filesystem::create_directories(empty);
  LoadOptions load{.tokenizer = empty};
  auto opened =
      load.open(write_config("pagoda_load_empty_model", 1000), engine::LoadFormat::kDummy);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(opened.status().message(), HasSubstr("has no tokenizer.json"));
}

TEST(LoadOptionsFlagsTest, DummyConfigWithoutATokenizerSaysToPassOne) {
  LoadOptions load;
  auto opened = load.open(write_config("pagoda_load_no_tok", 1000), engine::LoadFormat::kDummy);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(opened.status().message(), HasSubstr("pass --tokenizer"));
}

TEST_F(LoadOptionsTest, TokenizerThatIsNoGgufNamesTheFlag) {
  const std::string text = (std::filesystem::temp_directory_path() / "pagoda_load.txt").string();
  std::ofstream(text) << "not a tokenizer";
  LoadOptions load{.tokenizer = text};
  auto opened = load.open(kGguf, engine::LoadFormat::kAuto);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("--tokenizer "));
}

TEST_F(LoadOptionsTest, DummyWithAGgufIsFine) {
  LoadOptions load;
  auto opened = load.open(kGguf, engine::LoadFormat::kDummy);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  EXPECT_EQ(opened->tokenizer->vocab_size(), 49152);
  EXPECT_EQ(opened->tokenizer_files, opened->files);
  EXPECT_TRUE(opened->files->chat_template.has_value());
}

TEST_F(LoadOptionsTest, ConfigWithAGgufTokenizerTakesItsTokenizerAndTemplate) {
  LoadOptions load{.tokenizer = kGguf};
  const std::string dir = write_config("pagoda_load_config", 50000);
  for (const std::string& model : {dir, dir + "/config.json"}) {
    auto opened = load.open(model, engine::LoadFormat::kDummy);
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    EXPECT_EQ(opened->files->config.vocab_size, 50000);
    EXPECT_EQ(opened->tokenizer->vocab_size(), 49152);
    EXPECT_EQ(opened->tokenizer_files->path, kGguf);
    EXPECT_TRUE(opened->tokenizer_files->chat_template.has_value());
  }
}

TEST_F(LoadOptionsTest, TokenizerLargerThanTheModelsVocabularyIsRefused) {
  LoadOptions load{.tokenizer = kGguf};
  auto opened =
      load.open(write_config("pagoda_load_small_vocab", 1000), engine::LoadFormat::kDummy);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(opened.status().message(), HasSubstr("more than the model's vocab_size 1000"));
}

}  // namespace
}  // namespace pagoda::cli
