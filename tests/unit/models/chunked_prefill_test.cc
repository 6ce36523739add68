// One prompt prefilled in one piece, in uneven chunks and token by token must give the same
// logits, whatever the KV block size: the paged cache and the positions carry the context, not
// the batch shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_util.h"

namespace pagoda::models {
namespace {

const std::string kForwardDir = std::string(PAGODA_TEST_DATA_DIR) + "/forward/";

// Chunking changes only which rows share a matmul call (the kernel may pick another tile shape
// for m = 1 than for m = 40, so sums run in another order), never the math: differences stay
// at fp32 rounding of the accumulated sums, ~1e-6 of the row's scale.
constexpr double kTolerance = 2e-5;

std::vector<std::int32_t> prompt_of(const std::string& model) {
  std::ifstream in(kForwardDir + model + "/logits.json");
  const auto golden = nlohmann::json::parse(in);
  return golden["sequences"][2]["ids"].get<std::vector<std::int32_t>>();  // 150 tokens
}

std::vector<float> run_in_chunks(CpuModelExecutor& executor, const std::vector<std::int32_t>& ids,
                                 const std::vector<std::int64_t>& chunks, std::int64_t block_size) {
  testing::SequenceRun run(executor, block_size, static_cast<std::int64_t>(ids.size()));
  std::vector<float> logits;
  std::int64_t begin = 0;
  std::size_t c = 0;
  while (begin < static_cast<std::int64_t>(ids.size())) {
    const std::int64_t size =
        c < chunks.size() ? chunks[c++] : static_cast<std::int64_t>(ids.size()) - begin;
    logits = run.step(std::span(ids).subspan(begin, size));
    begin += size;
  }
  return logits;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]));
  return worst;
}

struct ChunkCase {
  std::string model;
  std::int64_t block_size;
};

class ChunkedPrefillTest : public ::testing::TestWithParam<ChunkCase> {};

TEST_P(ChunkedPrefillTest, SameLogitsWholeChunkedAndTokenByToken) {
  const auto [model, block_size] = GetParam();
  const auto ids = prompt_of(model);
  auto executor = testing::open_executor(kForwardDir + model, 256);
  ASSERT_NE(executor, nullptr);

  const auto whole =
      run_in_chunks(*executor, ids, {static_cast<std::int64_t>(ids.size())}, block_size);
  const auto chunked = run_in_chunks(*executor, ids, {5, 7}, block_size);
  const auto by_token =
      run_in_chunks(*executor, ids, std::vector<std::int64_t>(ids.size(), 1), block_size);
  double scale = 1.0;
  for (float l : whole) scale = std::max(scale, std::abs(double{l}));
  std::printf("%s block %lld: chunked %.3g, token by token %.3g (scale %.3g)\n", model.c_str(),
              static_cast<long long>(block_size), max_diff(whole, chunked),
              max_diff(whole, by_token), scale);
  EXPECT_LE(max_diff(whole, chunked), kTolerance * scale);
  EXPECT_LE(max_diff(whole, by_token), kTolerance * scale);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, ChunkedPrefillTest,
                         ::testing::Values(ChunkCase{"tiny_llama", 1}, ChunkCase{"tiny_llama", 7},
                                           ChunkCase{"tiny_llama", 16}, ChunkCase{"tiny_qwen2", 1},
                                           ChunkCase{"tiny_qwen2", 7}, ChunkCase{"tiny_qwen2", 16}),
                         [](const auto& info) {
                           return info.param.model + "_block" +
                                  std::to_string(info.param.block_size);
                         });

}  // namespace
}  // namespace pagoda::models
