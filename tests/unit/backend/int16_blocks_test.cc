// int16_blocks.h, the block decoders both ISAs' int16 kernels share: every type's quants, scales
// and mins are those int16_contract.h reads from the GGUF bytes, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/int16_types.h"
#include "backend/cpu/tensor_view.h"
#include "int16_blocks_probe.h"
#include "int16_contract.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::contract_block;
using testing::ContractBlock;
using testing::kContractBlock;
using testing::random_weights;
using testing::seed_trace;
using testing::test_seed;

TEST(Int16BlocksTest, DecodeTheContractsBlocks) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "int16_blocks.h needs AVX2";
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 20);
  for (DType dtype : testing::kContractTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::int64_t k = 768;
    // Unaligned rows: the decoders must not assume alignment.
    const std::vector<std::uint8_t> bytes = random_weights(rng, dtype, 8, k, 3);
    const TensorView w = dense_view(bytes.data() + 3, dtype, 8, k);
    for (std::int64_t b = 0; b < k / kContractBlock; ++b) {
      std::int8_t q[8][32];
      float scale[8][2];
      float min[8][2];
      const int sub_blocks =
          testing::decode_int16_blocks(dtype, w.row(0), w.row_stride, b, q, scale, min);
      for (int l = 0; l < 8; ++l) {
        const ContractBlock want = contract_block(dtype, w.row(l), b);
        ASSERT_EQ(sub_blocks, want.sub_blocks);
        for (int c = 0; c < kContractBlock; ++c) {
          ASSERT_EQ(q[l][c], want.q[c]) << "row " << l << " block " << b << " column " << c;
        }
        for (int t = 0; t < sub_blocks; ++t) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(scale[l][t]),
                    std::bit_cast<std::uint32_t>(want.scale[t]))
              << "row " << l << " block " << b << " sub-block " << t;
          if (want.has_min) {
            ASSERT_EQ(std::bit_cast<std::uint32_t>(min[l][t]),
                      std::bit_cast<std::uint32_t>(want.min[t]))
                << "row " << l << " block " << b << " sub-block " << t;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
