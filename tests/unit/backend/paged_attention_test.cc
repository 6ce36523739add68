#include "backend/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/prefill_attention.h"
#include "model/dequantize.h"
#include "quant/float_codes.h"
#include "test_random.h"

namespace pagoda::cpu {
namespace {

using testing::random_floats;
using testing::seed_trace;
using testing::test_seed;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint16_t kHalfNaN = 0x7E00;

struct Shape {
  std::int64_t num_heads;
  std::int64_t num_kv_heads;
  std::int64_t head_dim;
  std::int64_t block_size;
};

// A KV cache (fp32 or fp16) whose blocks are handed out in shuffled order, filled with each
// sequence's K/V through write_kv. Unwritten slots hold NaN so reading one poisons the output.
class PagedCache {
 public:
  PagedCache(std::mt19937_64& rng, const Shape& shape, const std::vector<std::int64_t>& seq_lens,
             KvDtype dtype = KvDtype::kF32)
      : shape_(shape) {
    for (std::int64_t len : seq_lens) {
      max_blocks_ = std::max(max_blocks_, (len + shape.block_size - 1) / shape.block_size + 1);
    }
    const std::int64_t num_blocks = static_cast<std::int64_t>(seq_lens.size()) * max_blocks_ + 2;
    const std::size_t pool = static_cast<std::size_t>(num_blocks * shape.block_size *
                                                      shape.num_kv_heads * shape.head_dim);
    view_ = {.num_blocks = num_blocks,
             .block_size = shape.block_size,
             .num_kv_heads = shape.num_kv_heads,
             .head_dim = shape.head_dim,
             .dtype = dtype};
    if (dtype == KvDtype::kF16) {
      k_f16_.assign(pool, kHalfNaN);
      v_f16_.assign(pool, kHalfNaN);
      view_.k_f16 = k_f16_.data();
      view_.v_f16 = v_f16_.data();
    } else {
      k_.assign(pool, kNaN);
      v_.assign(pool, kNaN);
      view_.k = k_.data();
      view_.v = v_.data();
    }
    std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    // Entries past a sequence's last block stay -1: reading one trips a CHECK or crashes.
    block_tables_.assign(seq_lens.size() * static_cast<std::size_t>(max_blocks_), -1);
    std::size_t next = 0;
    for (std::size_t s = 0; s < seq_lens.size(); ++s) {
      const std::int64_t used = (seq_lens[s] + shape.block_size - 1) / shape.block_size;
      for (std::int64_t b = 0; b < used; ++b) {
        block_tables_[s * static_cast<std::size_t>(max_blocks_) + static_cast<std::size_t>(b)] =
            ids[next++];
      }
      const std::int64_t row = shape.num_kv_heads * shape.head_dim;
      keys_.push_back(random_floats(rng, static_cast<std::size_t>(seq_lens[s] * row)));
      values_.push_back(random_floats(rng, static_cast<std::size_t>(seq_lens[s] * row)));
    }
  }

  // Stores positions [begin, end) of sequence s, as the runner does before attention.
  void write(std::size_t s, std::int64_t begin, std::int64_t end) {
    const std::int64_t row = shape_.num_kv_heads * shape_.head_dim;
    std::vector<std::int64_t> slots;
    for (std::int64_t p = begin; p < end; ++p) {
      const std::int32_t block = block_tables_[s * static_cast<std::size_t>(max_blocks_) +
                                               static_cast<std::size_t>(p / shape_.block_size)];
      slots.push_back(block * shape_.block_size + p % shape_.block_size);
    }
    write_kv(keys_[s].data() + begin * row, values_[s].data() + begin * row, slots.data(),
             end - begin, view_);
  }

  const KvCacheView& view() const { return view_; }
  const std::int32_t* block_table(std::size_t s) const {
    return block_tables_.data() + s * static_cast<std::size_t>(max_blocks_);
  }
  std::int64_t max_blocks() const { return max_blocks_; }

 private:
  Shape shape_;
  std::int64_t max_blocks_ = 0;
  std::vector<float> k_, v_;
  std::vector<std::uint16_t> k_f16_, v_f16_;
  KvCacheView view_;
  std::vector<std::int32_t> block_tables_;
  std::vector<std::vector<float>> keys_, values_;
};

struct Step {
  std::vector<std::int32_t> query_start_loc{0};
  std::vector<std::int32_t> seq_lens;
  std::vector<std::int32_t> block_tables;
};

// Outputs are convex combinations of values in [-1, 1]; fp32 online softmax over <= 300 keys
// with head_dim <= 128 products per score stays within ~1e-6 of the double reference.
constexpr float kTolerance = 1e-5f;

// Worst-case fp32 error of one output element against the double reference, for q, k, v in
// [-1, 1], head_dim D and n keys (u = 2^-24), whatever the kernel's summation order:
//   - a score, a dot product of D terms (the prefill tile folds the scale into q: D + 1
//     roundings): |ds| <= (D + 1) u sum |q_d k_d| / sqrt(D) <= (D + 1) u sqrt(D);
//   - a weight exp(s - m) rounds the subtraction (|s - m| <= 2 sqrt(D)) and exp (within 2 ulp of
//     expf, <= 5u), and so does each rescale by exp(m - m') (one per block of >= 16 keys) with
//     its product; the maxima themselves are shared by a row's weights and cancel in the ratio:
//     relative error e <= |ds| + (n / 16 + 2) (2 sqrt(D) + 6) u;
//   - out = sum p v / sum p moves by <= 2e (weights off by a relative e, |v| <= 1), plus n u for
//     each sum (terms of one sign in the denominator, |p v| <= p in the numerator) and 2u for the
//     reciprocal and its product.
double attention_tolerance(std::int64_t head_dim, std::int64_t num_keys) {
  const double u = 0x1p-24;
  const double root = std::sqrt(static_cast<double>(head_dim));
  const double score = static_cast<double>(head_dim + 1) * u * root;
  const double weight =
      score + (static_cast<double>(num_keys) / 16.0 + 2.0) * (2.0 * root + 6.0) * u;
  return 2.0 * weight + (2.0 * static_cast<double>(num_keys) + 2.0) * u;
}

// Each output element of a batch against the reference, at the tolerance of its row's keys.
void expect_near_reference(const std::vector<float>& got, const std::vector<float>& want,
                           const Step& step, std::int64_t num_heads, std::int64_t head_dim) {
  for (std::size_t s = 0; s + 1 < step.query_start_loc.size(); ++s) {
    const std::int64_t q_len = step.query_start_loc[s + 1] - step.query_start_loc[s];
    for (std::int64_t i = 0; i < q_len; ++i) {
      const std::int64_t token = step.query_start_loc[s] + i;
      const std::int64_t keys = step.seq_lens[s] - q_len + i + 1;
      const double tolerance = attention_tolerance(head_dim, keys);
      for (std::int64_t e = 0; e < num_heads * head_dim; ++e) {
        const auto at = static_cast<std::size_t>(token * num_heads * head_dim + e);
        ASSERT_NEAR(got[at], want[at], tolerance)
            << "sequence " << s << " query " << i << " of " << q_len << " head " << e / head_dim
            << " dim " << e % head_dim;
      }
    }
  }
}

class PagedAttentionDtypeTest : public ::testing::TestWithParam<KvDtype> {};

INSTANTIATE_TEST_SUITE_P(KvDtypes, PagedAttentionDtypeTest,
                         ::testing::Values(KvDtype::kF32, KvDtype::kF16), [](const auto& info) {
                           return std::string(info.param == KvDtype::kF16 ? "F16" : "F32");
                         });

// The reference reads the same (rounded, for fp16) cache contents, so both dtypes meet the fp32
// tolerance.
TEST_P(PagedAttentionDtypeTest, MixedBatchMatchesDenseReference) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 40);
  ThreadPool pool(2);
  // (seq_len, q_len): decode, prefill, chunked prefill; lengths around block edges and past
  // the AVX-512 kernel's 128-key score blocks.
  const std::vector<std::pair<std::int64_t, std::int64_t>> seqs = {
      {1, 1}, {15, 15}, {16, 3}, {17, 1}, {100, 100}, {100, 37}, {300, 1}, {260, 133}};
  const std::vector<std::int64_t> block_sizes = {1, 16, 64};
  int config = 0;
  for (std::int64_t head_dim : {64, 128}) {
    for (std::int64_t ratio : {1, 3, 4, 8}) {
      const Shape shape{ratio * (ratio == 8 ? 1 : 2), ratio == 8 ? 1 : 2, head_dim,
                        block_sizes[static_cast<std::size_t>(config++) % block_sizes.size()]};
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " heads " +
                   std::to_string(shape.num_heads) + "/" + std::to_string(shape.num_kv_heads) +
                   " block_size " + std::to_string(shape.block_size));
      std::vector<std::int64_t> lens;
      for (const auto& [len, q_len] : seqs) lens.push_back(len);
      PagedCache cache(rng, shape, lens, GetParam());
      Step step;
      for (std::size_t s = 0; s < seqs.size(); ++s) {
        cache.write(s, 0, seqs[s].first);
        step.query_start_loc.push_back(step.query_start_loc.back() +
                                       static_cast<std::int32_t>(seqs[s].second));
        step.seq_lens.push_back(static_cast<std::int32_t>(seqs[s].first));
      }
      const AttentionBatch batch{step.query_start_loc.data(), step.seq_lens.data(),
                                 cache.block_table(0), static_cast<std::int64_t>(seqs.size()),
                                 cache.max_blocks()};
      const std::int64_t num_tokens = step.query_start_loc.back();
      const std::vector<float> q =
          random_floats(rng, static_cast<std::size_t>(num_tokens * shape.num_heads * head_dim));
      std::vector<float> got(q.size(), kNaN), want(q.size(), kNaN);
      paged_attention(pool, q.data(), shape.num_heads, cache.view(), batch, got.data());
      paged_attention_reference(q.data(), shape.num_heads, cache.view(), batch, want.data());
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], kTolerance) << "element " << i;
      }
    }
  }
}

// Runs one sequence of `len` tokens through attention in the given chunks (each chunk's K/V
// written first, as the runner does) and returns the outputs of all tokens in order.
std::vector<float> run_in_chunks(ThreadPool& pool, std::mt19937_64 rng, const Shape& shape,
                                 std::int64_t len, const std::vector<float>& q,
                                 const std::vector<std::int64_t>& chunk_ends,
                                 KvDtype dtype = KvDtype::kF32) {
  PagedCache cache(rng, shape, {len}, dtype);
  const std::int64_t row = shape.num_heads * shape.head_dim;
  std::vector<float> out(q.size(), kNaN);
  std::int64_t begin = 0;
  for (std::int64_t end : chunk_ends) {
    cache.write(0, begin, end);
    const std::vector<std::int32_t> starts = {0, static_cast<std::int32_t>(end - begin)};
    const std::vector<std::int32_t> seq_lens = {static_cast<std::int32_t>(end)};
    const AttentionBatch batch{starts.data(), seq_lens.data(), cache.block_table(0), 1,
                               cache.max_blocks()};
    paged_attention(pool, q.data() + begin * row, shape.num_heads, cache.view(), batch,
                    out.data() + begin * row);
    begin = end;
  }
  return out;
}

// Which tile computes a row follows from its step alone (paged_attention.h): the decode tile for
// every query of a step with fewer than kPrefillMinQueries, and for those in the step's last KV
// block; the prefill tile for the others. Each tile gives a row the same bits whatever else
// shares it, so a prompt run in any chunks gives, row by row, the bits of the token-by-token run
// (decode tile) or of the whole-prompt run (prefill tile), and those two agree to fp32 rounding.
// The chunking {288, 300} is a prefix-cache hit on 18 blocks: its tail gets the whole run's bits.
TEST_P(PagedAttentionDtypeTest, ChunkedPrefillRowsGetTheirTilesBits) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 41);
  ThreadPool pool(2);
  const Shape shape{9, 3, 64, 16};
  const std::int64_t len = 300;
  const KvDtype dtype = GetParam();
  const std::vector<float> q =
      random_floats(rng, static_cast<std::size_t>(len * shape.num_heads * shape.head_dim));
  // The chunkings below assume it: 17 runs the decode tile, 20+ the prefill tile.
  ASSERT_EQ(kPrefillMinQueries, 18);
  // The same rng state builds the same cache contents in each run.
  const std::vector<float> whole = run_in_chunks(pool, rng, shape, len, q, {len}, dtype);
  std::vector<std::int64_t> each;
  for (std::int64_t t = 1; t <= len; ++t) each.push_back(t);
  const std::vector<float> stepwise = run_in_chunks(pool, rng, shape, len, q, each, dtype);
  std::vector<std::int64_t> small;  // Chunks of 1 .. 15 tokens.
  for (std::int64_t end = 0, i = 0; end < len; ++i) {
    end = std::min(len, end + 1 + i % (kPrefillMinQueries - 1));
    small.push_back(end);
  }
  const std::int64_t row = shape.num_heads * shape.head_dim;
  const auto row_bytes = static_cast<std::size_t>(row) * sizeof(float);
  for (const std::vector<std::int64_t>& chunk_ends :
       {std::vector<std::int64_t>{len}, std::vector<std::int64_t>{17, 40, 60, 128, 150, 200, len},
        std::vector<std::int64_t>{288, len}, std::vector<std::int64_t>{256, len}, small, each}) {
    SCOPED_TRACE("chunks ending at " + std::to_string(chunk_ends[0]) + ", " +
                 std::to_string(chunk_ends.size() > 1 ? chunk_ends[1] : 0) + " ...");
    const std::vector<float> out = run_in_chunks(pool, rng, shape, len, q, chunk_ends, dtype);
    std::int64_t begin = 0;
    for (std::int64_t end : chunk_ends) {
      const std::int64_t last_block_start = (end - 1) / shape.block_size * shape.block_size;
      for (std::int64_t t = begin; t < end; ++t) {
        const bool decode = end - begin < kPrefillMinQueries || t >= last_block_start;
        const std::vector<float>& want = decode ? stepwise : whole;
        ASSERT_EQ(0, std::memcmp(out.data() + t * row, want.data() + t * row, row_bytes))
            << "token " << t << " of the chunk [" << begin << ", " << end << "), "
            << (decode ? "decode" : "prefill") << " tile";
      }
      begin = end;
    }
  }
  for (float x : whole) ASSERT_FALSE(std::isnan(x));
  for (std::int64_t t = 0; t < len; ++t) {
    // Both tiles are within attention_tolerance of the exact value, so of each other by twice it.
    const double tolerance = 2.0 * attention_tolerance(shape.head_dim, t + 1);
    for (std::int64_t e = 0; e < row; ++e) {
      const auto at = static_cast<std::size_t>(t * row + e);
      ASSERT_NEAR(whole[at], stepwise[at], tolerance) << "token " << t << " element " << e;
    }
  }
}

// Sequences of query lengths 1, 7 (decode tile), 33 and 300 (prefill tile) in one batch, as fresh
// prefills and as chunks after earlier ones; contexts that end mid-block, block sizes 16 and 5, GQA
// groups of 1 and 3, head dims 64, 80 (the AVX-512 tiles' 16-lane vectors plus a remainder) and
// 128.
TEST_P(PagedAttentionDtypeTest, PrefillAndDecodeRowsMatchReferenceAtAwkwardSizes) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 43);
  ThreadPool pool(2);
  // (seq_len, q_len)
  const std::vector<std::pair<std::int64_t, std::int64_t>> seqs = {
      {1, 1},   {7, 7},     {45, 7},    {33, 33}, {203, 1},
      {97, 33}, {300, 300}, {317, 300}, {513, 1}, {70, 1}};
  struct Config {
    std::int64_t group;
    std::int64_t head_dim;
    std::int64_t block_size;
  };
  for (const Config& c : {Config{1, 64, 16}, Config{3, 64, 5}, Config{3, 128, 16},
                          Config{1, 128, 5}, Config{3, 80, 16}}) {
    const Shape shape{2 * c.group, 2, c.head_dim, c.block_size};
    SCOPED_TRACE("group " + std::to_string(c.group) + " head_dim " + std::to_string(c.head_dim) +
                 " block_size " + std::to_string(c.block_size));
    std::vector<std::int64_t> lens;
    for (const auto& [len, q_len] : seqs) lens.push_back(len);
    PagedCache cache(rng, shape, lens, GetParam());
    Step step;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      cache.write(s, 0, seqs[s].first);
      step.query_start_loc.push_back(step.query_start_loc.back() +
                                     static_cast<std::int32_t>(seqs[s].second));
      step.seq_lens.push_back(static_cast<std::int32_t>(seqs[s].first));
    }
    const AttentionBatch batch{step.query_start_loc.data(), step.seq_lens.data(),
                               cache.block_table(0), static_cast<std::int64_t>(seqs.size()),
                               cache.max_blocks()};
    const std::int64_t num_tokens = step.query_start_loc.back();
    const std::vector<float> q =
        random_floats(rng, static_cast<std::size_t>(num_tokens * shape.num_heads * c.head_dim));
    std::vector<float> got(q.size(), kNaN), want(q.size(), kNaN);
    paged_attention(pool, q.data(), shape.num_heads, cache.view(), batch, got.data());
    paged_attention_reference(q.data(), shape.num_heads, cache.view(), batch, want.data());
    expect_near_reference(got, want, step, shape.num_heads, c.head_dim);
  }
}

// The ISAs' prefill tiles this CPU runs for head_dim, as (name, wide) pairs.
std::vector<std::pair<std::string, bool>> prefill_isas(std::int64_t head_dim) {
  std::vector<std::pair<std::string, bool>> isas;
  if (cpu_has_avx2() && head_dim % 8 == 0) isas.emplace_back("avx2", false);
  if (cpu_has_avx512() && head_dim % 16 == 0) isas.emplace_back("avx512", true);
  return isas;
}

// Runs one ISA's prefill tile over every KV head of a single sequence (its block table at
// block_table), cutting each head's q_len x group rows into tiles of tile_sizes[0], [1], ... in
// turn (at most the ISA's rows each).
void run_prefill_tiles(bool wide, const std::vector<float>& q, std::int64_t num_heads,
                       const KvCacheView& cache, const std::int32_t* block_table,
                       std::int64_t seq_len, std::int64_t q_len,
                       const std::vector<std::int64_t>& tile_sizes, std::vector<float>& out) {
  const std::int64_t group = num_heads / cache.num_kv_heads;
  const std::int64_t head_dim = cache.head_dim;
  const std::int64_t max_rows = wide ? avx512::kPrefillRows : avx2::kPrefillRows;
  std::vector<float> scratch(
      static_cast<std::size_t>(wide ? avx512::prefill_tile_scratch_floats(head_dim)
                                    : avx2::prefill_tile_scratch_floats(head_dim)));
  const bool half = cache.dtype == KvDtype::kF16;
  for (std::int64_t h = 0; h < cache.num_kv_heads; ++h) {
    std::size_t next = 0;
    for (std::int64_t first = 0; first < q_len * group;) {
      const std::int64_t rows =
          std::min({tile_sizes[next++ % tile_sizes.size()], max_rows, q_len * group - first});
      PrefillTile tile{};
      tile.q = q.data() + h * group * head_dim;
      tile.out = out.data() + h * group * head_dim;
      tile.token_stride = num_heads * head_dim;
      tile.group_size = group;
      tile.head_dim = head_dim;
      tile.first_row = first;
      tile.num_rows = rows;
      tile.first_position = seq_len - q_len;
      tile.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
      tile.k = half ? nullptr : cache.k + h * head_dim;
      tile.v = half ? nullptr : cache.v + h * head_dim;
      tile.k_f16 = half ? cache.k_f16 + h * head_dim : nullptr;
      tile.v_f16 = half ? cache.v_f16 + h * head_dim : nullptr;
      tile.slot_stride = cache.slot_stride();
      tile.block_table = block_table;
      tile.block_size = cache.block_size;
      tile.scratch = scratch.data();
      if (wide) {
        avx512::prefill_tile(tile);
      } else {
        avx2::prefill_tile(tile);
      }
      first += rows;
    }
  }
}

// The prefill tile alone, on each ISA the CPU has, at query lengths 1, 7, 33 and 300 (fresh and
// after earlier chunks): against the reference, and bit-identical whether a head's rows are cut
// into whole tiles or into tiles of 1, 5, 17 ... rows that start mid-token.
TEST_P(PagedAttentionDtypeTest, PrefillTileMatchesReferenceInAnyTiling) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 44);
  for (std::int64_t group : {1, 3}) {
    for (std::int64_t head_dim : {64, 80}) {
      const Shape shape{2 * group, 2, head_dim, 16};
      const auto isas = prefill_isas(head_dim);
      if (isas.empty()) GTEST_SKIP() << "no AVX2 on this CPU (or PAGODA_CPU_ISA)";
      for (const auto& [q_len, seq_len] : std::vector<std::pair<std::int64_t, std::int64_t>>{
               {1, 1}, {1, 45}, {7, 7}, {7, 50}, {33, 33}, {33, 97}, {300, 300}, {300, 317}}) {
        SCOPED_TRACE("group " + std::to_string(group) + " head_dim " + std::to_string(head_dim) +
                     " q_len " + std::to_string(q_len) + " seq_len " + std::to_string(seq_len));
        PagedCache cache(rng, shape, {seq_len}, GetParam());
        cache.write(0, 0, seq_len);
        const std::vector<float> q =
            random_floats(rng, static_cast<std::size_t>(q_len * shape.num_heads * head_dim));
        Step step;
        step.query_start_loc.push_back(static_cast<std::int32_t>(q_len));
        step.seq_lens.push_back(static_cast<std::int32_t>(seq_len));
        const AttentionBatch batch{step.query_start_loc.data(), step.seq_lens.data(),
                                   cache.block_table(0), 1, cache.max_blocks()};
        std::vector<float> want(q.size(), kNaN);
        paged_attention_reference(q.data(), shape.num_heads, cache.view(), batch, want.data());
        for (const auto& [name, wide] : isas) {
          SCOPED_TRACE(name);
          std::vector<float> whole(q.size(), kNaN), ragged(q.size(), kNaN);
          run_prefill_tiles(wide, q, shape.num_heads, cache.view(), cache.block_table(0), seq_len,
                            q_len, {1000}, whole);
          run_prefill_tiles(wide, q, shape.num_heads, cache.view(), cache.block_table(0), seq_len,
                            q_len, {1, 5, 1000, 17, 2}, ragged);
          expect_near_reference(whole, want, step, shape.num_heads, head_dim);
          ASSERT_EQ(0, std::memcmp(whole.data(), ragged.data(), whole.size() * sizeof(float)));
        }
      }
    }
  }
}

TEST(PagedAttentionTest, WriteKvSkipsPaddingSlots) {
  std::vector<float> k(2 * 2 * 8, 0.0f), v(k.size(), 0.0f);
  const KvCacheView view{k.data(), v.data(), 2, 2, 1, 8};
  const std::vector<float> new_k(2 * 8, 1.0f), new_v(2 * 8, 2.0f);
  const std::vector<std::int64_t> slots = {3, -1};
  write_kv(new_k.data(), new_v.data(), slots.data(), 2, view);
  for (std::int64_t i = 0; i < 32; ++i) {
    EXPECT_EQ(k[i], i >= 24 ? 1.0f : 0.0f) << i;
    EXPECT_EQ(v[i], i >= 24 ? 2.0f : 0.0f) << i;
  }
}

// The fp16 cache stores each value rounded to nearest even, and attention over it stays close to
// attention over the fp32 cache (values in [-1, 1]: rounding error <= 2^-12 per element).
TEST(PagedAttentionTest, Fp16CacheIsRoundedFp32Cache) {
  SCOPED_TRACE(seed_trace());
  std::mt19937_64 rng(test_seed() + 42);
  ThreadPool pool(2);
  const Shape shape{9, 3, 64, 16};
  const std::int64_t len = 150;
  const std::vector<float> q =
      random_floats(rng, static_cast<std::size_t>(len * shape.num_heads * shape.head_dim));
  std::mt19937_64 rng_f32 = rng;
  PagedCache f32(rng_f32, shape, {len}, KvDtype::kF32);
  PagedCache f16(rng, shape, {len}, KvDtype::kF16);
  f32.write(0, 0, len);
  f16.write(0, 0, len);
  for (std::int64_t slot = 0; slot < f32.view().num_blocks * shape.block_size; ++slot) {
    for (std::int64_t i = 0; i < shape.num_kv_heads * shape.head_dim; ++i) {
      const std::int64_t e = slot * shape.num_kv_heads * shape.head_dim + i;
      const float k = f32.view().k[e];
      if (std::isnan(k)) {
        ASSERT_EQ(f16.view().k_f16[e], kHalfNaN) << e;  // Unwritten in both.
        continue;
      }
      ASSERT_EQ(f16.view().k_f16[e], quant::float_to_fp16(k)) << e;
      ASSERT_EQ(f16.view().v_f16[e], quant::float_to_fp16(f32.view().v[e])) << e;
      ASSERT_LE(std::fabs(fp16_to_float(f16.view().k_f16[e]) - k), 0x1p-12f) << e;
    }
  }
  const std::vector<std::int32_t> starts = {0, static_cast<std::int32_t>(len)};
  const std::vector<std::int32_t> seq_lens = {static_cast<std::int32_t>(len)};
  const AttentionBatch batch_f32{starts.data(), seq_lens.data(), f32.block_table(0), 1,
                                 f32.max_blocks()};
  const AttentionBatch batch_f16{starts.data(), seq_lens.data(), f16.block_table(0), 1,
                                 f16.max_blocks()};
  std::vector<float> out_f32(q.size(), kNaN), out_f16(q.size(), kNaN);
  paged_attention(pool, q.data(), shape.num_heads, f32.view(), batch_f32, out_f32.data());
  paged_attention(pool, q.data(), shape.num_heads, f16.view(), batch_f16, out_f16.data());
  float max_diff = 0.0f;
  for (std::size_t i = 0; i < q.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(out_f32[i] - out_f16[i]));
  }
  EXPECT_GT(max_diff, 0.0f);  // The values really were rounded.
  EXPECT_LT(max_diff, 2e-3f);
}
}  // namespace
}  // namespace pagoda::cpu
