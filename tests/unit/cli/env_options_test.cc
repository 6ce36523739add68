// Environment variables for every flag, and where they stand between the command line, the
// --config file and the defaults: command line > environment > config file > default.
#include "cli/env_options.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/config_file.h"

namespace pagoda::cli {
namespace {

// A prefix no real environment sets, so the tests see only the variables they set themselves.
constexpr const char* kPrefix = "PAGODATEST_";

// The shape of `pagoda serve`'s options: a positional, a number, a list, a flag, an option
// that already names its own variable, and --config.
struct Options {
  std::string model;
  std::string config;
  int port = 8000;
  std::int64_t max_model_len = 0;
  std::vector<std::string> names;
  bool quiet = false;
  std::string api_key;
  CLI::App app{"test"};

  Options() {
    app.add_option("model", model);
    app.add_option("--config", config);
    app.add_option("--port", port);
    app.add_option("--max-model-len", max_model_len);
    app.add_option("--served-model-name", names);
    app.add_flag("--disable-log-requests", quiet);
    app.add_option("--api-key", api_key)->envname("MY_KEY");
    add_env_names(app, kPrefix);
  }

  // Parses `args` as the command line, then applies --config as `pagoda serve` does.
  void parse(std::vector<std::string> args) {
    std::vector<const char*> argv = {"test"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    if (!config.empty()) {
      const Status s = apply_config_file(config, app);
      ASSERT_TRUE(s.ok()) << s.message();
    }
  }
};

class EnvOptionsTest : public ::testing::Test {
 protected:
  void set_env(const std::string& name, const std::string& value) {
    ASSERT_EQ(setenv(name.c_str(), value.c_str(), 1), 0);
    set_.push_back(name);
  }
  std::string write_config(const std::string& text) {
    // One file per test: ctest may run the tests of this binary in parallel processes.
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    const auto path = std::filesystem::path(::testing::TempDir()) / (test + ".yaml");
    std::ofstream(path) << text;
    return path.string();
  }
  void TearDown() override {
    for (const std::string& name : set_) unsetenv(name.c_str());
  }

 private:
  std::vector<std::string> set_;
};

TEST(EnvNameTest, UpperSnakeCaseOfTheLongFlag) {
  EXPECT_EQ(env_name_for("PAGODA_", "--max-num-seqs"), "PAGODA_MAX_NUM_SEQS");
  EXPECT_EQ(env_name_for("PAGODA_", "--port"), "PAGODA_PORT");
  EXPECT_EQ(env_name_for("PAGODA_", "--trace-sample-rate"), "PAGODA_TRACE_SAMPLE_RATE");
  EXPECT_EQ(env_name_for("PAGODA_", "model"), "PAGODA_MODEL");
}

TEST(EnvNameTest, EveryOptionButHelpGetsOneAndExistingNamesStay) {
  Options o;
  EXPECT_EQ(o.app.get_option("model")->get_envname(), "PAGODATEST_MODEL");
  EXPECT_EQ(o.app.get_option("--config")->get_envname(), "PAGODATEST_CONFIG");
  EXPECT_EQ(o.app.get_option("--max-model-len")->get_envname(), "PAGODATEST_MAX_MODEL_LEN");
  EXPECT_EQ(o.app.get_option("--disable-log-requests")->get_envname(),
            "PAGODATEST_DISABLE_LOG_REQUESTS");
  EXPECT_EQ(o.app.get_option("--api-key")->get_envname(), "MY_KEY");
  EXPECT_EQ(o.app.get_help_ptr()->get_envname(), "");
}

TEST_F(EnvOptionsTest, DefaultsWhenNothingIsSet) {
  Options o;
  o.parse({});
  EXPECT_EQ(o.port, 8000);
  EXPECT_EQ(o.model, "");
  EXPECT_FALSE(o.quiet);
}

TEST_F(EnvOptionsTest, EnvironmentAloneConfiguresEverything) {
  set_env("PAGODATEST_MODEL", "/models/m.gguf");
  set_env("PAGODATEST_PORT", "9000");
  set_env("PAGODATEST_SERVED_MODEL_NAME", "llama");
  set_env("PAGODATEST_DISABLE_LOG_REQUESTS", "true");
  set_env("MY_KEY", "secret");
  Options o;
  o.parse({});
  EXPECT_EQ(o.model, "/models/m.gguf");
  EXPECT_EQ(o.port, 9000);
  EXPECT_EQ(o.names, std::vector<std::string>{"llama"});
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(o.api_key, "secret");
}

TEST_F(EnvOptionsTest, FalseAndEmptyValuesLeaveTheDefault) {
  set_env("PAGODATEST_DISABLE_LOG_REQUESTS", "0");
  set_env("PAGODATEST_PORT", "");  // compose's `PAGODA_PORT: ${PORT:-}` when PORT is unset
  Options o;
  o.parse({});
  EXPECT_FALSE(o.quiet);
  EXPECT_EQ(o.port, 8000);
}

TEST_F(EnvOptionsTest, CommandLineBeatsEnvironment) {
  set_env("PAGODATEST_PORT", "9000");
  set_env("PAGODATEST_MODEL", "/models/env.gguf");
  Options o;
  o.parse({"/models/cli.gguf", "--port", "9100"});
  EXPECT_EQ(o.port, 9100);
  EXPECT_EQ(o.model, "/models/cli.gguf");
}

TEST_F(EnvOptionsTest, EnvironmentBeatsConfigFileWhichBeatsDefault) {
  const std::string config =
      write_config("port: 7000\nmax_model_len: 512\nmodel: /models/f.gguf\n");
  set_env("PAGODATEST_PORT", "9000");
  set_env("PAGODATEST_MODEL", "/models/env.gguf");
  Options o;
  o.parse({"--config", config});
  EXPECT_EQ(o.port, 9000);  // environment over the file
  EXPECT_EQ(o.model, "/models/env.gguf");
  EXPECT_EQ(o.max_model_len, 512);  // the file over the default
}

TEST_F(EnvOptionsTest, ConfigFileItselfFromTheEnvironment) {
  set_env("PAGODATEST_CONFIG", write_config("max-model-len: 300\nport: 7000\n"));
  Options o;
  o.parse({"--port", "7100"});
  EXPECT_EQ(o.max_model_len, 300);
  EXPECT_EQ(o.port, 7100);  // the command line over the file named in the environment
}

TEST_F(EnvOptionsTest, BadValueInTheEnvironmentIsAParseError) {
  set_env("PAGODATEST_PORT", "eighty");
  Options o;
  EXPECT_THROW(o.parse({}), CLI::ParseError);
}

}  // namespace
}  // namespace pagoda::cli
