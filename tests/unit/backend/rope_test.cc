#include "backend/cpu/rope.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_floats;
using testing::seed_trace;
using testing::test_seed;

std::vector<float> from_bits(const std::vector<std::uint32_t>& bits) {
  std::vector<float> v;
  for (std::uint32_t b : bits) v.push_back(std::bit_cast<float>(b));
  return v;
}

void expect_bits_eq(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want[i]))
        << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

// Golden values below come from transformers 5.23.0 / torch 2.15.0 (CPU, fp32):
//   ROPE_INIT_FUNCTIONS[rope_type](LlamaConfig(...), "cpu") and LlamaRotaryEmbedding +
//   apply_rotary_pos_emb, printed as float bits.

TEST(RopeTest, DefaultInvFreqMatchesHfBitForBit) {
  // theta 100000 (SmolLM2), head_dim 64: first 8 of 32.
  const std::vector<float> inv_freq = rope_inv_freq(64, 100000.0, {});
  const std::vector<float> want = from_bits({0x3f800000, 0x3f32a506, 0x3ef953cf, 0x3eadfcff,
                                             0x3e72d423, 0x3e297409, 0x3dec7fd6, 0x3da50956});
  expect_bits_eq(std::vector<float>(inv_freq.begin(), inv_freq.begin() + 8), want);
  EXPECT_EQ(std::bit_cast<std::uint32_t>(inv_freq[31]), 0x37706b6du);
}

TEST(RopeTest, LinearScalingMatchesHf) {
  RopeScaling scaling;
  scaling.type = RopeScalingType::kLinear;
  scaling.factor = 4.0;
  const std::vector<float> inv_freq = rope_inv_freq(64, 10000.0, scaling);
  expect_bits_eq({inv_freq[0], inv_freq[1], inv_freq[8], inv_freq[31]},
                 from_bits({0x3e800000, 0x3e3ff911, 0x3ccccccd, 0x380bd472}));
}

TEST(RopeTest, Llama3ScalingMatchesHf) {
  // Llama 3.1: theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192.
  RopeScaling scaling;
  scaling.type = RopeScalingType::kLlama3;
  scaling.factor = 8.0;
  scaling.low_freq_factor = 1.0;
  scaling.high_freq_factor = 4.0;
  scaling.original_max_position_embeddings = 8192;
  const std::vector<float> inv_freq = rope_inv_freq(128, 500000.0, scaling);
  ASSERT_EQ(inv_freq.size(), 64u);
  // Indices 0 (high frequency, kept), 29..33 (the smoothed band and its edges), 63 (stretched).
  expect_bits_eq({inv_freq[0], inv_freq[29], inv_freq[30], inv_freq[31], inv_freq[32], inv_freq[33],
                  inv_freq[63]},
                 from_bits({0x3f800000, 0x3b0dfd06, 0x3ab3d11d, 0x3a60979e, 0x3a0995d2, 0x39a3f108,
                            0x34a4c2ff}));
}

// Rotations agree with HF up to its cos/sin: torch's vectorized cosf is not always correctly
// rounded (cos(1000 * inv_freq[3]) is 1 ulp off), so inputs of magnitude <= 2 get 1e-6.
void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
}

TEST(RopeTest, RotateHalfMatchesHfApplyRotaryPosEmb) {
  // 3 tokens at positions 0, 5, 1000; 2 q heads, 1 kv head, head_dim 8, theta 10000.
  std::vector<float> q(48);
  std::vector<float> k(24);
  for (int i = 0; i < 48; ++i) q[i] = static_cast<float>((i * 37) % 23) * 0.125f - 1.375f;
  for (int i = 0; i < 24; ++i) k[i] = static_cast<float>((i * 11) % 19) * 0.25f - 2.0f;
  const std::vector<std::int32_t> positions = {0, 5, 1000};
  const std::vector<float> inv_freq = rope_inv_freq(8, 10000.0, {});
  apply_rope(inv_freq.data(), RopeStyle::kRotateHalf, positions.data(), 3, q.data(), 2, k.data(), 1,
             8);
  expect_near(
      q,
      from_bits({0xbfb00000, 0x3ec00000, 0xbf400000, 0x3f800000, 0xbe000000, 0xbfa00000, 0x3f000000,
                 0xbf200000, 0x3f900000, 0x00000000, 0xbf900000, 0x3f200000, 0xbf000000, 0x3fa00000,
                 0x3e000000, 0xbf800000, 0xbf2055fe, 0xbf3fa3a6, 0x3fb1611f, 0x3e8384b5, 0xbf77a75f,
                 0x3f168dbb, 0xbe394f35, 0xbfafd67a, 0xbf8bcfe6, 0xbf65dcc1, 0x3f83d69f, 0xbe05c225,
                 0xbf36d422, 0x3da23f34, 0xbf130161, 0x3f8feb0f, 0xbf844cfd, 0xbf6824e6, 0xbf88c2ab,
                 0xbf66b89c, 0x3f33f618, 0x3f2d6d72, 0x3eff8492, 0xbc7e1840, 0xbf6f359c, 0x3f87907e,
                 0xbf75322e, 0xbf49cf16, 0x3e3a5eb0, 0xbf696dda, 0x3f824496, 0xbf089ed8}));
  expect_near(k,
              from_bits({0xc0000000, 0x3f400000, 0xbfa00000, 0x3fc00000, 0xbf000000, 0x40100000,
                         0x3e800000, 0xbfe00000, 0x402b9510, 0xbf8f0388, 0x3fe950e9, 0xbe8332c9,
                         0xbe7fc364, 0xbd267020, 0xbfb49092, 0x3f9fd687, 0xbf855e6c, 0x3f8bbc31,
                         0x3f50e774, 0xbf28ed30, 0xbe4b22ec, 0xc005cce2, 0xbfa11a0b, 0xbff9fef4}));
}

TEST(RopeTest, MatchesReferenceAndAdjacentPairsEqualPermutedRotateHalf) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 10);
  for (std::int64_t head_dim : {64, 128}) {
    const std::int64_t tokens = 7;
    const std::int64_t heads = 9;
    const std::int64_t kv_heads = 3;
    const std::vector<float> inv_freq = rope_inv_freq(head_dim, 100000.0, {});
    std::vector<std::int32_t> positions;
    for (std::int64_t t = 0; t < tokens; ++t)
      positions.push_back(static_cast<std::int32_t>(rng() % 9000));
    const std::vector<float> q0 = random_floats(rng, tokens * heads * head_dim);
    const std::vector<float> k0 = random_floats(rng, tokens * kv_heads * head_dim);
    for (RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kAdjacentPairs}) {
      std::vector<float> q = q0, k = k0, q_ref = q0, k_ref = k0;
      apply_rope(inv_freq.data(), style, positions.data(), tokens, q.data(), heads, k.data(),
                 kv_heads, head_dim);
      apply_rope_reference(inv_freq.data(), style, positions.data(), tokens, q_ref.data(), heads,
                           k_ref.data(), kv_heads, head_dim);
      expect_bits_eq(q, q_ref);
      expect_bits_eq(k, k_ref);
    }
    // llama.cpp's converter permutes each head's rows so that HF's (i, i + d/2) pairs become
    // (2i, 2i + 1): rotating the permuted head with adjacent pairs must equal rotate-half.
    const std::int64_t half = head_dim / 2;
    std::vector<float> q_half = q0, q_adjacent(q0.size()), k_dummy = k0;
    for (std::int64_t row = 0; row < tokens * heads; ++row) {
      for (std::int64_t i = 0; i < half; ++i) {
        q_adjacent[row * head_dim + 2 * i] = q0[row * head_dim + i];
        q_adjacent[row * head_dim + 2 * i + 1] = q0[row * head_dim + i + half];
      }
    }
    apply_rope(inv_freq.data(), RopeStyle::kRotateHalf, positions.data(), tokens, q_half.data(),
               heads, k_dummy.data(), kv_heads, head_dim);
    apply_rope(inv_freq.data(), RopeStyle::kAdjacentPairs, positions.data(), tokens,
               q_adjacent.data(), heads, k_dummy.data(), kv_heads, head_dim);
    for (std::int64_t row = 0; row < tokens * heads; ++row) {
      for (std::int64_t i = 0; i < half; ++i) {
        ASSERT_EQ(q_adjacent[row * head_dim + 2 * i], q_half[row * head_dim + i]);
        ASSERT_EQ(q_adjacent[row * head_dim + 2 * i + 1], q_half[row * head_dim + i + half]);
      }
    }
  }
}

}  // namespace
}  // namespace pagoda::cpu
