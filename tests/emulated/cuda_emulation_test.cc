// The CUDA emulation itself (kernels/emulation/): its warp collectives against the PTX fragment
// layouts computed here directly, and its scheduling against a kernel with a race, which it must
// be able to show (the reason it draws thread order and cp.async landing by chance).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cuda/scalar_type.h"
#include "tests/emulated/cuda_emulation_kernels.h"

namespace pagoda::emulated_test {
namespace {

std::vector<std::uint16_t> random_bits(std::size_t n, bool bf16, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  std::vector<std::uint16_t> bits(n);
  cuda::convert_from_f32(v.data(), static_cast<std::int64_t>(n),
                         bf16 ? cuda::ScalarType::kBF16 : cuda::ScalarType::kF16, bits.data());
  return bits;
}

std::vector<float> values(const std::vector<std::uint16_t>& bits, bool bf16) {
  std::vector<float> v(bits.size());
  cuda::convert_to_f32(bits.data(), static_cast<std::int64_t>(bits.size()),
                       bf16 ? cuda::ScalarType::kBF16 : cuda::ScalarType::kF16, v.data());
  return v;
}

TEST(CudaEmulation, MmaIsTheProductOfTheFragmentsTiles) {
  std::mt19937 rng(7);
  for (const bool bf16 : {true, false}) {
    const auto a = random_bits(256, bf16, rng), b = random_bits(128, bf16, rng);
    std::vector<float> c(128), d(128, NAN);
    for (float& x : c) x = static_cast<float>(rng() % 7) - 3.0f;
    emulated_mma(bf16, a.data(), b.data(), c.data(), d.data());
    const auto av = values(a, bf16), bv = values(b, bf16);
    for (int r = 0; r < 16; ++r) {
      for (int col = 0; col < 8; ++col) {
        double want = c[r * 8 + col];
        for (int k = 0; k < 16; ++k) want += static_cast<double>(av[r * 16 + k]) * bv[k * 8 + col];
        EXPECT_NEAR(d[r * 8 + col], want, 1e-5 * (1.0 + std::abs(want))) << r << ", " << col;
      }
    }
  }
}

TEST(CudaEmulation, LdmatrixGivesEachLaneItsFragment) {
  std::vector<std::uint16_t> tile(256);
  for (int i = 0; i < 256; ++i) tile[i] = static_cast<std::uint16_t>(i);  // element = r * 16 + c
  for (const bool trans : {false, true}) {
    std::vector<std::uint32_t> out(128);
    emulated_ldmatrix(trans, tile.data(), out.data());
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < 4; ++i) {
        // Matrix i is rows 8 (i % 2).., columns 8 (i / 2)..: lanes 8i..8i+7 gave its row
        // addresses (row (8i + j) % 16 of half (8i + j) / 16).
        const int r0 = 8 * (i % 2), c0 = 8 * (i / 2);
        const auto at = [&](int r, int c) {
          return static_cast<std::uint32_t>(tile[(r0 + r) * 16 + c0 + c]);
        };
        const int g = lane / 4, t = lane % 4;
        const std::uint32_t want = trans ? (at(2 * t, g) | at(2 * t + 1, g) << 16)
                                         : (at(g, 2 * t) | at(g, 2 * t + 1) << 16);
        EXPECT_EQ(out[lane * 4 + i], want)
            << (trans ? "trans " : "") << "lane " << lane << " reg " << i;
      }
    }
  }
}

TEST(CudaEmulation, ShufflesReadTheLanesTheyName) {
  std::vector<int> out(64 * 4);
  emulated_shuffles(out.data());
  for (int warp = 0; warp < 2; ++warp) {
    for (int lane = 0; lane < 32; ++lane) {
      const int* o = out.data() + (warp * 32 + lane) * 4;
      const int base = 100 * warp;
      EXPECT_EQ(o[0], base + (lane ^ 5));
      EXPECT_EQ(o[1], base + 7);
      EXPECT_EQ(o[2], base + lane / 8 * 8 + (lane % 8 + 1) % 8);
      EXPECT_EQ(o[3], base + (lane + 3 < 32 ? lane + 3 : lane));
    }
  }
}

TEST(CudaEmulation, VotesAndBitCountsSeeTheWholeWarp) {
  std::vector<unsigned> out(64 * 4);
  emulated_votes(out.data());
  for (int warp = 0; warp < 2; ++warp) {
    unsigned ballot = 0;
    for (int lane = 0; lane < 32; ++lane) ballot |= ((7 * lane + warp) % 5 == 2 ? 1u : 0u) << lane;
    ASSERT_NE(ballot, 0u);
    int lowest = 0, leading = 0;
    while ((ballot >> lowest & 1u) == 0u) ++lowest;
    while ((ballot << leading & 0x80000000u) == 0u) ++leading;
    for (int lane = 0; lane < 32; ++lane) {
      const unsigned* o = out.data() + (warp * 32 + lane) * 4;
      EXPECT_EQ(o[0], ballot) << "warp " << warp << " lane " << lane;
      EXPECT_EQ(o[1], static_cast<unsigned>(lowest + 1));
      EXPECT_EQ(o[2], static_cast<unsigned>(leading));
      EXPECT_EQ(o[3], 1u);  // lane 0 of warp 0, lane 3 of warp 1
    }
  }
}

TEST(CudaEmulation, BlockScanIsExclusiveWithTheBlocksTotal) {
  std::mt19937 rng(3);
  std::vector<int> in(256), exclusive(256, -1), total(2, -1);
  for (int& x : in) x = static_cast<int>(rng() % 5);
  emulated_block_scan(in.data(), exclusive.data(), total.data());
  for (int round = 0; round < 2; ++round) {
    int sum = 0;
    for (int t = 0; t < 128; ++t) {
      EXPECT_EQ(exclusive[round * 128 + t], sum) << "round " << round << " thread " << t;
      sum += in[round * 128 + t];
    }
    EXPECT_EQ(total[round], sum) << "round " << round;
  }
}

TEST(CudaEmulationDeathTest, APartialMaskStopsTheRun) {
  std::vector<int> out(32);
  EXPECT_DEATH(emulated_partial_mask_shuffle(out.data()), "only full masks");
}

// A read of another lane's cp.async with neither the wait nor a barrier between: across CTAs the
// emulation must show it both ways (the copy seen and not), while the synced kernel always sees it.
TEST(CudaEmulation, AnUnsyncedReadOfACopyIsCaught) {
  const std::uint32_t src[4] = {0x12345678u, 0, 0, 0};
  constexpr int kBlocks = 64;
  std::vector<std::uint32_t> out(kBlocks);
  emulated_copy_then_read(true, kBlocks, src, out.data());
  for (const std::uint32_t v : out) EXPECT_EQ(v, src[0]);
  emulated_copy_then_read(false, kBlocks, src, out.data());
  int seen = 0;
  for (const std::uint32_t v : out) seen += v == src[0];
  EXPECT_GT(seen, 0) << "the race never resolved the lucky way";
  EXPECT_LT(seen, kBlocks) << "the race was never shown";
}

// CTAs run in an order drawn by chance: in one launch, some CTAs run before their partner and
// some after, so a kernel that reads another CTA's writes shows the race (in grid order, every
// even CTA would run first).
TEST(CudaEmulation, CtasRunInAnOrderDrawnByChance) {
  constexpr int kBlocks = 64;
  std::vector<int> done(kBlocks, 0), seen(kBlocks, -1);
  emulated_partner_done(kBlocks, done.data(), seen.data());
  int even_after = 0, odd_after = 0;
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT_EQ(seen[i] + seen[i ^ 1], 1) << i;  // of two partners, exactly one ran first
    (i % 2 == 0 ? even_after : odd_after) += seen[i];
  }
  EXPECT_GT(even_after, 0) << "no even CTA ran after its partner";
  EXPECT_GT(odd_after, 0) << "no odd CTA ran after its partner";
}

}  // namespace
}  // namespace pagoda::emulated_test
