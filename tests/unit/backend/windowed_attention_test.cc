// windowed_attention (scale / sliding window / soft-cap) and gelu_tanh_mul against their double
// references on fresh random inputs at awkward sizes.
#include "backend/cpu/windowed_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backend/cpu/gelu_tanh.h"
#include "backend/cpu/paged_attention.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_floats;
using testing::seed_trace;
using testing::test_seed;

struct Case {
  std::int64_t num_heads;
  std::int64_t num_kv_heads;
  std::int64_t head_dim;
  std::int64_t block_size;
  std::vector<std::int64_t> seq_lens;  // cached tokens per sequence after this step
  std::vector<std::int64_t> q_lens;    // new query tokens per sequence
  ScoreOptions options;
  KvDtype dtype = KvDtype::kF32;
};

// A batch over a paged cache whose blocks are shuffled; slots no sequence owns hold NaN, so a
// read outside the window's blocks bookkeeping poisons the output.
struct Batch {
  std::vector<float> k, v;
  std::vector<std::uint16_t> k16, v16;
  KvCacheView cache;
  std::vector<std::int32_t> block_tables, query_start_loc{0}, seq_lens;
  std::vector<float> q;
  std::int64_t max_blocks = 0;
  std::int64_t num_tokens = 0;

  AttentionBatch view() const {
    return {.query_start_loc = query_start_loc.data(),
            .seq_lens = seq_lens.data(),
            .block_tables = block_tables.data(),
            .num_seqs = static_cast<std::int64_t>(seq_lens.size()),
            .max_blocks_per_seq = max_blocks};
  }
};

Batch make_batch(std::mt19937_64& rng, const Case& c) {
  Batch b;
  for (std::int64_t len : c.seq_lens)
    b.max_blocks = std::max(b.max_blocks, (len + c.block_size - 1) / c.block_size);
  const auto num_seqs = static_cast<std::int64_t>(c.seq_lens.size());
  const std::int64_t num_blocks = num_seqs * b.max_blocks + 3;
  const std::int64_t row = c.num_kv_heads * c.head_dim;
  const auto pool = static_cast<std::size_t>(num_blocks * c.block_size * row);
  b.cache = {.num_blocks = num_blocks,
             .block_size = c.block_size,
             .num_kv_heads = c.num_kv_heads,
             .head_dim = c.head_dim,
             .dtype = c.dtype};
  if (c.dtype == KvDtype::kF16) {
    b.k16.assign(pool, 0x7E00);
    b.v16.assign(pool, 0x7E00);
    b.cache.k_f16 = b.k16.data();
    b.cache.v_f16 = b.v16.data();
  } else {
    b.k.assign(pool, std::numeric_limits<float>::quiet_NaN());
    b.v.assign(pool, std::numeric_limits<float>::quiet_NaN());
    b.cache.k = b.k.data();
    b.cache.v = b.v.data();
  }
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  b.block_tables.assign(static_cast<std::size_t>(num_seqs * b.max_blocks), -1);
  std::size_t next = 0;
  for (std::int64_t s = 0; s < num_seqs; ++s) {
    const std::int64_t len = c.seq_lens[static_cast<std::size_t>(s)];
    std::vector<std::int64_t> slots;
    for (std::int64_t blk = 0; blk < (len + c.block_size - 1) / c.block_size; ++blk) {
      b.block_tables[static_cast<std::size_t>(s * b.max_blocks + blk)] = ids[next++];
    }
    for (std::int64_t p = 0; p < len; ++p) {
      slots.push_back(
          b.block_tables[static_cast<std::size_t>(s * b.max_blocks + p / c.block_size)] *
              c.block_size +
          p % c.block_size);
    }
    const auto keys = random_floats(rng, static_cast<std::size_t>(len * row));
    const auto values = random_floats(rng, static_cast<std::size_t>(len * row));
    write_kv(keys.data(), values.data(), slots.data(), len, b.cache);
    b.seq_lens.push_back(static_cast<std::int32_t>(len));
    b.num_tokens += c.q_lens[static_cast<std::size_t>(s)];
    b.query_start_loc.push_back(static_cast<std::int32_t>(b.num_tokens));
  }
  // Queries up to +-2 so that scores spread enough for the soft-cap and the window to matter.
  b.q = random_floats(rng, static_cast<std::size_t>(b.num_tokens * c.num_heads * c.head_dim), -2.0f,
                      2.0f);
  return b;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= worst)) worst = d;  // NaN sticks
  }
  return worst;
}

std::vector<Case> cases() {
  return {
      // Gemma 3 270M's shape: 4 q heads on 1 KV head, head_dim 256, window shorter than the
      // context; a decode row and a chunk crossing the window edge.
      {4, 1, 256, 16, {700, 40}, {1, 40}, {.scale = 0.0625f, .sliding_window = 512}},
      {4, 1, 256, 16, {600}, {77}, {.scale = 0.0625f, .sliding_window = 512}},
      // Awkward: head_dim 24, block 7, window 1 (only itself), 5 and 13; GQA 3.
      {6, 2, 24, 7, {1, 9, 50}, {1, 9, 3}, {.sliding_window = 1}},
      {6, 2, 24, 7, {1, 9, 50}, {1, 4, 50}, {.sliding_window = 5}},
      {3, 3, 40, 5, {33, 2}, {33, 1}, {.scale = 0.3f, .sliding_window = 13}},
      // No window: another scale, and a soft-cap (Gemma 2's 50 and a tight 1.5).
      {8, 2, 64, 16, {129, 17}, {129, 1}, {.scale = 0.05f}},
      {4, 2, 32, 16, {65}, {65}, {.logit_softcap = 50.0f}},
      {4, 2, 32, 3, {40, 31}, {6, 31}, {.scale = 1.0f, .sliding_window = 9, .logit_softcap = 1.5f}},
      // fp16 cache.
      {4, 1, 256, 16, {530, 3}, {20, 3}, {.sliding_window = 512}, KvDtype::kF16},
      {6, 2, 24, 7, {40}, {40}, {.sliding_window = 6, .logit_softcap = 2.0f}, KvDtype::kF16},
  };
}

TEST(WindowedAttentionTest, MatchesReference) {
  std::mt19937_64 rng(test_seed());
  SCOPED_TRACE(seed_trace());
  ThreadPool pool(2);
  for (const Case& c : cases()) {
    SCOPED_TRACE(::testing::Message()
                 << "head_dim " << c.head_dim << " window " << c.options.sliding_window << " scale "
                 << c.options.scale << " cap " << c.options.logit_softcap);
    Batch b = make_batch(rng, c);
    const auto n = static_cast<std::size_t>(b.num_tokens * c.num_heads * c.head_dim);
    std::vector<float> got(n, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> want(n, std::numeric_limits<float>::quiet_NaN());
    windowed_attention(pool, b.q.data(), c.num_heads, b.cache, b.view(), c.options, got.data());
    windowed_attention_reference(b.q.data(), c.num_heads, b.cache, b.view(), c.options,
                                 want.data());
    // fp32 online softmax over <= 700 keys of head_dim <= 256 against double: see
    // paged_attention_test.cc's bound; 2e-5 holds it with margin for |q| <= 2.
    EXPECT_LT(max_abs_diff(got, want), 2e-5);
  }
}

// Without options the reference is plain causal attention (paged_attention_reference), and a
// window short enough to drop keys changes the result: the comparisons above can fail.
TEST(WindowedAttentionTest, ReferenceAgreesWithPlainAttentionAndWindowMatters) {
  std::mt19937_64 rng(test_seed());
  SCOPED_TRACE(seed_trace());
  const Case c{4, 2, 32, 16, {90, 12}, {90, 2}, {}};
  Batch b = make_batch(rng, c);
  const auto n = static_cast<std::size_t>(b.num_tokens * c.num_heads * c.head_dim);
  std::vector<float> plain(n), windowed(n), wide(n), narrow(n);
  paged_attention_reference(b.q.data(), c.num_heads, b.cache, b.view(), plain.data());
  windowed_attention_reference(b.q.data(), c.num_heads, b.cache, b.view(), {}, windowed.data());
  EXPECT_LT(max_abs_diff(plain, windowed), 1e-6);
  windowed_attention_reference(b.q.data(), c.num_heads, b.cache, b.view(), {.sliding_window = 90},
                               wide.data());
  EXPECT_LT(max_abs_diff(plain, wide), 1e-6);  // a window as long as the context drops nothing
  windowed_attention_reference(b.q.data(), c.num_heads, b.cache, b.view(), {.sliding_window = 8},
                               narrow.data());
  EXPECT_GT(max_abs_diff(plain, narrow), 1e-2);
}

TEST(GeluTanhMulTest, MatchesReference) {
  std::mt19937_64 rng(test_seed());
  SCOPED_TRACE(seed_trace());
  for (std::int64_t n : {1, 7, 8, 9, 31, 2048, 2051}) {
    // Gates over the range an MLP sees and past exp's clamp at both ends.
    auto gate = random_floats(rng, static_cast<std::size_t>(n), -12.0f, 12.0f);
    if (n > 8) {
      gate[0] = -100.0f;
      gate[1] = 100.0f;
      gate[2] = 0.0f;
    }
    const auto up = random_floats(rng, static_cast<std::size_t>(n), -3.0f, 3.0f);
    std::vector<float> got(static_cast<std::size_t>(n)), want(got.size());
    gelu_tanh_mul(gate.data(), up.data(), n, got.data());
    gelu_tanh_mul_reference(gate.data(), up.data(), n, want.data());
    for (std::int64_t i = 0; i < n; ++i) {
      const double tol = 4e-6 * (1.0 + std::abs(static_cast<double>(want[i])));
      EXPECT_NEAR(got[i], want[i], tol) << "n " << n << " i " << i << " gate " << gate[i];
    }
  }
  // gelu_tanh(1) = 0.8411919906 (PyTorch's gelu(approximate="tanh")).
  const float one = 1.0f;
  float out = 0.0f;
  gelu_tanh_mul_reference(&one, &one, 1, &out);
  EXPECT_NEAR(out, 0.8411919906, 1e-7);
}

}  // namespace
}  // namespace pagoda::cpu
