// Gemma 3 270M (Q4_K_M GGUF: Q5_0 / Q4_K / Q6_K / Q8_0 matrices; sandwich norms, GeGLU, per-head
// q/k norms, 5 sliding-window layers per full one, two RoPE bases) against transformers' fp32
// forward pass (tests/data/forward/gemma3_greedy.json, made by make_gemma3_golden.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "backend/cpu/cpu_features.h"
#include "model_test_util.h"
#include "real_model_golden.h"

namespace pagoda::models {
namespace {

const std::string kModelPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf";
const std::string kGoldenPath = std::string(PAGODA_TEST_DATA_DIR) + "/forward/gemma3_greedy.json";

// The tolerance rule of SmolLM2's golden test (smollm2_golden_test.cc): the reference's own fp32
// rounding against its fp64 run is recorded in the golden file (fp32_vs_fp64); two fp32
// implementations may sit about twice that apart, and the tolerance keeps a margin of several
// times that while a real error (a wrong window, RoPE base or norm) moves logprobs by 1e-1 or
// more. With int16 activations (the default on AVX2 CPUs for the weights that take them) the
// rounding of x to 15 significant bits adds its own share, as for SmolLM2.
constexpr double kLogprobTolerance = 2e-3;
constexpr double kInt16LogprobTolerance = 1e-2;

TEST(Gemma3GoldenTest, GreedyAndLogprobsMatchTransformers) {
  if (!std::filesystem::exists(kModelPath)) {
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string_view(ci) == "true") {
      FAIL() << kModelPath << " is missing although CI=true; scripts/setup.sh fetches it";
    }
    GTEST_SKIP() << kModelPath << " is absent: run scripts/setup.sh to fetch Gemma 3 270M";
  }
  const std::vector<testing::GoldenCase> cases = testing::read_golden_cases(kGoldenPath);
  ASSERT_FALSE(cases.empty()) << kGoldenPath;
  const bool int16 = cpu::cpu_int16_activations();
  const double tolerance = int16 ? kInt16LogprobTolerance : kLogprobTolerance;
  // 384-token chunks: the two long prompts (> 1024 tokens) cross the 512-token window inside a
  // chunk and across chunks.
  const std::int64_t chunk = 384;
  auto executor = testing::open_executor(kModelPath, chunk);
  ASSERT_NE(executor, nullptr);
  const double worst_logprob_diff =
      testing::expect_greedy_and_logprobs_match(*executor, cases, chunk, tolerance);
  RecordProperty("max_abs_logprob_diff", std::to_string(worst_logprob_diff));
  std::printf("Gemma 3 270M (%s kernels): max |logprob - reference| over top-10 ids = %.3g\n",
              int16 ? "int16" : "fp32", worst_logprob_diff);
}

}  // namespace
}  // namespace pagoda::models
