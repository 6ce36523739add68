#include "backend/cpu/embedding.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

TEST(EmbeddingTest, RowsAreBitIdenticalToReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 30);
  const std::int64_t vocab = 11;
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                      DType::kQ4_1, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const std::int64_t hidden = dtype_info(dtype).block_size == 256 ? 512 : 96;
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, vocab, hidden, 1);
    const TensorView table = dense_view(bytes.data() + 1, dtype, vocab, hidden);
    const std::vector<std::int32_t> ids = {3, 0, 10, 3, 7};
    std::vector<float> got(ids.size() * hidden, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> want(got.size());
    embedding(table, ids.data(), static_cast<std::int64_t>(ids.size()), got.data());
    embedding_reference(table, ids.data(), static_cast<std::int64_t>(ids.size()), want.data());
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  }
}

TEST(EmbeddingDeathTest, TokenOutsideVocabularyAborts) {
  std::vector<float> table(4 * 8, 0.0f);
  const TensorView view = dense_view(table.data(), DType::kF32, 4, 8);
  const std::int32_t id = 4;
  std::vector<float> out(8);
  EXPECT_DEATH(embedding(view, &id, 1, out.data()), "outside the vocabulary");
}

}  // namespace
}  // namespace pagoda::cpu
