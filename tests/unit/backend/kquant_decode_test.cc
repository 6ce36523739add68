// decode_row / decode_blocks on Q5_0, Q5_1 and the K-quants (kquant_blocks_avx2.h on AVX2 CPUs,
// the reference dequantizer below them): bit for bit the reference dequantizer's weights, for
// whole rows, pieces of rows and odd group counts (the decoder takes groups eight at a time).
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/row_decoder.h"
#include "backend/cpu/tensor_view.h"
#include "model/dequantize.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

TEST(KQuantDecodeTest, IsBitIdenticalToTheReferenceDequantizer) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 30);
  for (DType dtype : {DType::kQ5_0, DType::kQ5_1, DType::kQ2_K, DType::kQ3_K, DType::kQ4_K,
                      DType::kQ5_K, DType::kQ6_K}) {
    const std::int64_t block = dtype_info(dtype).block_size;
    // 1, 3, 8 and 11 stored blocks: short, exact and past one batch of eight.
    for (std::int64_t blocks : {1, 3, 8, 11}) {
      const std::int64_t k = blocks * block;
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " k=" + std::to_string(k));
      const std::int64_t rows = 3;
      const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, rows, k, 1);
      const TensorView w = dense_view(bytes.data() + 1, dtype, rows, k);
      std::vector<float> want(static_cast<std::size_t>(k));
      std::vector<float> got(static_cast<std::size_t>(k));
      for (std::int64_t r = 0; r < rows; ++r) {
        const Status status = dequantize(dtype, std::span(w.row(r), w.row_stride), want);
        ASSERT_TRUE(status.ok()) << status.to_string();
        // The whole row, then its tail from the second stored block.
        decode_row(w, r, 0, k, got.data());
        for (std::int64_t i = 0; i < k; ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
              << "row " << r << " element " << i;
        }
        if (blocks == 1) continue;
        decode_row(w, r, block, k - block, got.data());
        for (std::int64_t i = block; i < k; ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i - block]),
                    std::bit_cast<std::uint32_t>(want[i]))
              << "row " << r << " element " << i << " (from column " << block << ")";
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
