// Embedding, RMSNorm (+ residual), SiLU-times-up, RoPE + KV-cache append, the dummy weights'
// uniform fill, the overlapped steps' token gather and the FP8 GEMM's scale epilogue against the
// CPU backend or the host's arithmetic, in fp32, fp16 and bf16, on random inputs at awkward sizes
// with poisoned outputs.
//
// Tolerances: inputs are rounded to the dtype first, so kernel and reference see the same
// values; what differs is fp32 arithmetic order (~1e-6 relative) and the kernel's final rounding
// to the dtype, at most one unit roundoff u per element, so the relative L2 error stays under
// u (the bound used is 2u, plus 1e-5 for the fp32 order).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "backend/cpu/activation.h"
#include "backend/cpu/kv_cache_view.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/rope.h"
#include "backend/cuda/random_fill.h"
#include "backend/random_fill_draw.h"
#include "kernels/activation/gelu_tanh_mul.h"
#include "kernels/activation/silu_mul.h"
#include "kernels/embedding/embedding.h"
#include "kernels/embedding/previous_tokens.h"
#include "kernels/gemm/fp8_scale_epilogue.h"
#include "kernels/norm/head_rms_norm.h"
#include "kernels/norm/rms_norm.h"
#include "kernels/quant/fp8_quantize.h"
#include "kernels/rope/rope_kv_cache.h"
#include "tests/gpu/gpu_test_util.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::DeviceArray;
using gpu_test::DeviceVector;

double tolerance(ScalarType type, double rounding_steps = 2.0) {
  return rounding_steps * gpu_test::unit_roundoff(type) + 1e-5;
}

TEST(GpuEmbedding, GathersRowsExactly) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (ScalarType type : gpu_test::kAllTypes) {
    for (std::int64_t hidden : {8, 13, 4096}) {
      const std::int64_t vocab = 97;
      const std::vector<float> table = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(vocab * hidden), rng), type);
      std::vector<std::int32_t> ids = {0, 96, 5, 5, 42, 17, 1};
      DeviceArray d_table(table, type);
      DeviceVector<std::int32_t> d_ids(ids);
      DeviceArray d_out(ids.size() * hidden, type);
      d_out.poison();
      ASSERT_TRUE(kernels::launch_embedding({.table = d_table.data(),
                                             .ids = d_ids.data(),
                                             .out = d_out.data(),
                                             .num_table_rows = vocab,
                                             .num_tokens = static_cast<std::int64_t>(ids.size()),
                                             .hidden = hidden,
                                             .dtype = type},
                                            nullptr)
                      .ok());
      std::vector<float> want;
      for (std::int32_t id : ids) {
        want.insert(want.end(), table.begin() + id * hidden, table.begin() + (id + 1) * hidden);
      }
      EXPECT_EQ(d_out.download(), want) << gpu_test::name_of(type) << " hidden " << hidden;
    }
  }
}

// The dummy weights' draw: every element the host's random_fill_value rounded to the dtype, bit for
// bit (the CPU executor draws its dummy weights with it), and nothing written past n.
TEST(GpuRandomFill, IsTheHostsDrawRoundedOnce) {
  PAGODA_SKIP_WITHOUT_GPU();
  for (ScalarType type : gpu_test::kAllTypes) {
    const std::int64_t n = 1000;
    const std::uint64_t seed = 77;
    DeviceArray d_out(static_cast<std::size_t>(n + 5), type);
    d_out.poison();
    ASSERT_TRUE(cuda::fill_uniform(d_out.data(), n, type, -0.5f, 2.0f, seed, nullptr).ok());
    std::vector<float> want(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      want[i] = random_fill_value(seed, static_cast<std::uint64_t>(i), -0.5f, 2.5f);
    }
    want = gpu_test::round_to(want, type);
    const std::vector<float> got = d_out.download();
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + n), want) << gpu_test::name_of(type);
    for (std::int64_t i = n; i < n + 5; ++i) EXPECT_TRUE(std::isnan(got[i])) << i;
  }
}

// An overlapped step's inputs from the step before: each pair's token row takes the previous
// step's sampled id of its row; the other rows keep theirs. More pairs than a block's threads.
TEST(GpuGatherPreviousTokens, CopiesEachPairsSampledToken) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(12);
  const int num_tokens = 400, num_previous = 50, num_pairs = 300;
  std::vector<std::int32_t> token_ids(num_tokens), previous(num_previous), rows(num_tokens);
  std::iota(token_ids.begin(), token_ids.end(), 1000);
  std::iota(previous.begin(), previous.end(), 5000);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng);
  std::vector<std::int32_t> pairs;
  std::vector<std::int32_t> want = token_ids;
  for (int i = 0; i < num_pairs; ++i) {
    const auto from = static_cast<std::int32_t>(rng() % num_previous);
    pairs.insert(pairs.end(), {rows[i], from});
    want[rows[i]] = previous[from];
  }
  DeviceVector<std::int32_t> d_tokens(token_ids), d_pairs(pairs), d_previous(previous);
  ASSERT_TRUE(kernels::launch_gather_previous_tokens({.token_ids = d_tokens.data(),
                                                      .pairs = d_pairs.data(),
                                                      .previous = d_previous.data(),
                                                      .num_pairs = num_pairs},
                                                     nullptr)
                  .ok());
  EXPECT_EQ(d_tokens.download(), want);
}

// y = sums x the row's scale x the column's scale (+ bias), rounded once: on the float4 path (n a
// multiple of 4, past one block of columns) and the scalar one.
TEST(GpuFp8ScaleEpilogue, ScalesEachRowAndColumn) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const auto& [m, n] : {std::pair<std::int64_t, std::int64_t>{3, 4100}, {5, 1001}}) {
      for (bool with_bias : {false, true}) {
        const std::string what = std::string(gpu_test::name_of(type)) + " " + std::to_string(m) +
                                 "x" + std::to_string(n) + (with_bias ? " bias" : "");
        const auto sums = gpu_test::random_vector(static_cast<std::size_t>(m * n), rng, -300, 300);
        const auto x_scales = gpu_test::random_vector(static_cast<std::size_t>(m), rng, 0.01f, 1);
        const auto w_scales = gpu_test::random_vector(static_cast<std::size_t>(n), rng, 0.01f, 1);
        const auto bias = gpu_test::round_to(
            gpu_test::random_vector(static_cast<std::size_t>(n), rng, -2, 2), type);
        DeviceVector<float> d_sums(sums), d_x_scales(x_scales), d_w_scales(w_scales);
        DeviceArray d_bias(bias, type), d_y(static_cast<std::size_t>(m * n), type);
        d_y.poison();
        ASSERT_TRUE(kernels::launch_fp8_scale_epilogue({.sums = d_sums.data(),
                                                        .x_scales = d_x_scales.data(),
                                                        .w_scales = d_w_scales.data(),
                                                        .bias = with_bias ? d_bias.data() : nullptr,
                                                        .y = d_y.data(),
                                                        .m = m,
                                                        .n = n,
                                                        .dtype = type},
                                                       nullptr)
                        .ok());
        std::vector<float> want(static_cast<std::size_t>(m * n));
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            want[i * n + j] =
                sums[i * n + j] * x_scales[i] * w_scales[j] + (with_bias ? bias[j] : 0);
          }
        }
        // One rounding to the dtype; fp32 order (an FMA for the bias) within 1e-6.
        gpu_test::expect_close(d_y.download(), gpu_test::round_to(want, type),
                               gpu_test::unit_roundoff(type) + 1e-6, what);
      }
    }
  }
}

TEST(GpuRmsNorm, MatchesCpuWithAndWithoutResidual) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (ScalarType type : gpu_test::kAllTypes) {
    for (std::int64_t hidden : {13, 64, 1000, 4096}) {
      for (std::int64_t tokens : {1, 17}) {
        for (bool with_residual : {false, true}) {
          const auto n = static_cast<std::size_t>(tokens * hidden);
          const auto x = gpu_test::round_to(gpu_test::random_vector(n, rng), type);
          auto residual = gpu_test::round_to(gpu_test::random_vector(n, rng), type);
          const auto weight = gpu_test::round_to(
              gpu_test::random_vector(static_cast<std::size_t>(hidden), rng, 0.5f, 1.5f), type);
          DeviceArray d_x(x, type), d_residual(residual, type), d_weight(weight, type);
          DeviceArray d_out(n, type);
          d_out.poison();
          ASSERT_TRUE(
              kernels::launch_rms_norm({.x = d_x.data(),
                                        .residual = with_residual ? d_residual.data() : nullptr,
                                        .weight = d_weight.data(),
                                        .out = d_out.data(),
                                        .num_tokens = tokens,
                                        .hidden = hidden,
                                        .eps = 1e-5f,
                                        .dtype = type},
                                       nullptr)
                  .ok());
          std::vector<float> want(n);
          const std::string what = std::string(gpu_test::name_of(type)) + " hidden " +
                                   std::to_string(hidden) + " tokens " + std::to_string(tokens) +
                                   (with_residual ? " +residual" : "");
          if (with_residual) {
            // The kernel rounds the new residual to the dtype before normalizing it.
            std::vector<float> summed(n);
            for (std::size_t i = 0; i < n; ++i) summed[i] = residual[i] + x[i];
            summed = gpu_test::round_to(summed, type);
            cpu::rms_norm_reference(summed.data(), weight.data(), 1e-5f, tokens, hidden,
                                    want.data());
            gpu_test::expect_close(d_residual.download(), summed, 1e-7, what + " residual");
          } else {
            cpu::rms_norm_reference(x.data(), weight.data(), 1e-5f, tokens, hidden, want.data());
          }
          gpu_test::expect_close(d_out.download(), want, tolerance(type), what);
        }
      }
    }
  }
}

// Per-head RMSNorm in place on the q part of a QKV-shaped buffer: every (token, head) row of
// head_dim against the CPU reference; the columns past the normed heads (k, v) stay untouched.
TEST(GpuHeadRmsNorm, NormsEachHeadInPlaceInAStridedBuffer) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  for (ScalarType type : gpu_test::kAllTypes) {
    for (std::int64_t head_dim : {13, 64, 128, 256}) {
      for (std::int64_t tokens : {1, 19}) {
        const std::int64_t heads = 3;
        const std::int64_t stride = (heads + 2) * head_dim + 5;  // q heads, then other columns
        const auto n = static_cast<std::size_t>(tokens * stride);
        const auto x = gpu_test::round_to(gpu_test::random_vector(n, rng), type);
        const auto weight = gpu_test::round_to(
            gpu_test::random_vector(static_cast<std::size_t>(head_dim), rng, 0.5f, 1.5f), type);
        DeviceArray d_x(x, type), d_weight(weight, type);
        ASSERT_TRUE(kernels::launch_head_rms_norm({.x = d_x.data(),
                                                   .row_stride = stride,
                                                   .weight = d_weight.data(),
                                                   .num_tokens = tokens,
                                                   .num_heads = heads,
                                                   .head_dim = head_dim,
                                                   .eps = 1e-6f,
                                                   .dtype = type},
                                                  nullptr)
                        .ok());
        std::vector<float> want = x;
        for (std::int64_t t = 0; t < tokens; ++t) {
          cpu::rms_norm_reference(x.data() + t * stride, weight.data(), 1e-6f, heads, head_dim,
                                  want.data() + t * stride);
        }
        const std::string what = std::string(gpu_test::name_of(type)) + " head_dim " +
                                 std::to_string(head_dim) + " tokens " + std::to_string(tokens);
        const std::vector<float> got = d_x.download();
        gpu_test::expect_close(got, want, tolerance(type), what);
        for (std::int64_t t = 0; t < tokens; ++t) {
          for (std::int64_t c = heads * head_dim; c < stride; ++c) {
            ASSERT_EQ(got[t * stride + c], x[t * stride + c]) << what << " column " << c;
          }
        }
      }
    }
  }
}

TEST(GpuSiluMul, MatchesCpuOnStridedGateUp) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (ScalarType type : gpu_test::kAllTypes) {
    for (std::int64_t width : {7, 64, 14336}) {
      const std::int64_t tokens = 5;
      const std::int64_t stride = 2 * width;
      const auto gate_up = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(tokens * stride), rng, -6.0f, 6.0f),
          type);
      DeviceArray d_gate_up(gate_up, type);
      DeviceArray d_out(static_cast<std::size_t>(tokens * width), type);
      d_out.poison();
      ASSERT_TRUE(kernels::launch_silu_mul({.gate_up = d_gate_up.data(),
                                            .gate_up_row_stride = stride,
                                            .out = d_out.data(),
                                            .num_tokens = tokens,
                                            .width = width,
                                            .dtype = type},
                                           nullptr)
                      .ok());
      std::vector<float> want(static_cast<std::size_t>(tokens * width));
      for (std::int64_t t = 0; t < tokens; ++t) {
        cpu::silu_mul_reference(gate_up.data() + t * stride, gate_up.data() + t * stride + width,
                                width, want.data() + t * width);
      }
      gpu_test::expect_close(
          d_out.download(), want, tolerance(type),
          std::string(gpu_test::name_of(type)) + " width " + std::to_string(width));
    }
  }
}

// An FP8 down projection's input straight from the gate (SiLU and tanh-GELU): the bf16/f16
// output the same bits as without it, and the codes and per-token scales those
// launch_fp8_quantize_rows gives from that output, on the vector path and the element-wise one
// (an odd width, a row stride off 16 bytes).
TEST(GpuGatedActivation, FusedFp8OutputEqualsQuantizingItsOutput) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  for (ScalarType type : {ScalarType::kBF16, ScalarType::kF16}) {
    for (const auto launch : {kernels::launch_silu_mul, kernels::launch_gelu_tanh_mul}) {
      for (std::int64_t width : {std::int64_t{14336}, std::int64_t{1001}}) {
        SCOPED_TRACE(std::string(gpu_test::name_of(type)) + " width " + std::to_string(width));
        const std::int64_t tokens = 9;
        const std::int64_t stride = 2 * width + (width % 2);
        const auto gate_up = gpu_test::round_to(
            gpu_test::random_vector(static_cast<std::size_t>(tokens * stride), rng, -6.0f, 6.0f),
            type);
        // A zero row: codes 0, scale 1.
        const std::vector<float> zeros(static_cast<std::size_t>(stride), 0.0f);
        std::vector<float> with_zero = gate_up;
        std::copy(zeros.begin(), zeros.end(), with_zero.begin() + 3 * stride);
        DeviceArray d_gate_up(with_zero, type);
        const auto n = static_cast<std::size_t>(tokens * width);
        DeviceArray plain(n, type), fused(n, type);
        DeviceVector<std::uint8_t> fused_codes(n), codes(n);
        DeviceVector<float> fused_scales(static_cast<std::size_t>(tokens)),
            scales(static_cast<std::size_t>(tokens));
        kernels::SiluMulParams p{.gate_up = d_gate_up.data(),
                                 .gate_up_row_stride = stride,
                                 .out = plain.data(),
                                 .num_tokens = tokens,
                                 .width = width,
                                 .dtype = type};
        ASSERT_TRUE(launch(p, nullptr).ok());
        p.out = fused.data();
        p.out_fp8 = fused_codes.data();
        p.out_fp8_scales = fused_scales.data();
        ASSERT_TRUE(launch(p, nullptr).ok());
        ASSERT_TRUE(kernels::launch_fp8_quantize_rows({.x = plain.data(),
                                                       .codes = codes.data(),
                                                       .scales = scales.data(),
                                                       .rows = tokens,
                                                       .cols = width,
                                                       .dtype = type},
                                                      nullptr)
                        .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(fused.download(), plain.download());
        EXPECT_EQ(fused_scales.download(), scales.download());
        EXPECT_EQ(fused_codes.download(), codes.download());
        EXPECT_EQ(fused_scales.download()[3], 1.0f);
      }
    }
  }
  // Both or neither, and 16-bit only.
  DeviceArray x(64, ScalarType::kF32), y(32, ScalarType::kF32);
  DeviceVector<std::uint8_t> c(32);
  DeviceVector<float> sc(1);
  EXPECT_FALSE(kernels::launch_silu_mul({.gate_up = x.data(),
                                         .gate_up_row_stride = 64,
                                         .out = y.data(),
                                         .num_tokens = 1,
                                         .width = 32,
                                         .dtype = ScalarType::kF32,
                                         .out_fp8 = c.data(),
                                         .out_fp8_scales = sc.data()},
                                        nullptr)
                   .ok());
  EXPECT_FALSE(kernels::launch_silu_mul({.gate_up = x.data(),
                                         .gate_up_row_stride = 64,
                                         .out = y.data(),
                                         .num_tokens = 1,
                                         .width = 32,
                                         .dtype = ScalarType::kF32,
                                         .out_fp8 = c.data()},
                                        nullptr)
                   .ok());
}

struct RopeCase {
  std::int64_t head_dim;
  std::int64_t num_heads;
  std::int64_t num_kv_heads;
  std::int64_t block_size;
  kernels::RopeStyle style;
  std::int64_t tokens = 19;
  std::int64_t extra_columns = 0;  // qkv_row_stride beyond the q, k and v heads
};

// The new q is rotated in place; the rotated k and the v of each token land at its slot in the
// per-head page layout; padding tokens (slot -1) and unused slots are left untouched.
// Besides the 16-byte path (bf16/f16 8 elements, f32 4) the cases reach the element-wise
// fallback (d 12: a rotate-half partner off a 16-byte boundary; d 20 bf16/f16 adjacent pairs; an
// odd row stride) and, from 8192 tokens on, CTAs of 2 and 4 tokens with a partial last CTA.
TEST(GpuRopeKvCache, MatchesCpuRopeAndWritesOnlyMappedSlots) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  const RopeCase cases[] = {{64, 8, 8, 16, kernels::RopeStyle::kRotateHalf},
                            {128, 32, 8, 16, kernels::RopeStyle::kAdjacentPairs},
                            {128, 28, 4, 64, kernels::RopeStyle::kRotateHalf},
                            {64, 8, 1, 64, kernels::RopeStyle::kAdjacentPairs},
                            {12, 3, 1, 16, kernels::RopeStyle::kRotateHalf},
                            {20, 2, 2, 8, kernels::RopeStyle::kAdjacentPairs},
                            {64, 4, 2, 16, kernels::RopeStyle::kRotateHalf, 19, 3},
                            {64, 4, 2, 16, kernels::RopeStyle::kAdjacentPairs, 19, 1},
                            {64, 4, 2, 16, kernels::RopeStyle::kRotateHalf, 8195},
                            {32, 2, 1, 64, kernels::RopeStyle::kAdjacentPairs, 16387}};
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const RopeCase& rc : cases) {
      const std::int64_t tokens = rc.tokens;
      const std::int64_t num_blocks = (tokens + tokens / 4) / rc.block_size + 2;
      const std::int64_t d = rc.head_dim;
      const std::int64_t stride = (rc.num_heads + 2 * rc.num_kv_heads) * d + rc.extra_columns;
      const auto qkv = gpu_test::round_to(
          gpu_test::random_vector(static_cast<std::size_t>(tokens * stride), rng), type);
      // Positions up to 16k: large angles test sincosf's range reduction.
      std::vector<std::int32_t> positions(tokens);
      for (auto& p : positions) p = static_cast<std::int32_t>(rng() % 16385);
      std::vector<std::int64_t> slots(static_cast<std::size_t>(num_blocks * rc.block_size));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(tokens);
      slots[3] = -1;  // padding rows store nothing
      slots[11] = -1;
      for (std::int64_t t = 50; t < tokens; t += 97) slots[t] = -1;  // inside multi-token CTAs
      const std::vector<float> inv_freq = cpu::rope_inv_freq(d, 500000.0, cpu::RopeScaling{});

      DeviceArray d_qkv(qkv, type);
      DeviceVector<std::int32_t> d_positions(positions);
      DeviceVector<std::int64_t> d_slots(slots);
      DeviceVector<float> d_inv_freq(inv_freq);
      const auto cache_elems =
          static_cast<std::size_t>(num_blocks * rc.num_kv_heads * rc.block_size * d);
      DeviceArray d_k(cache_elems, type), d_v(cache_elems, type);
      d_k.poison();
      d_v.poison();
      kernels::RopeKvCacheParams params{.qkv = d_qkv.data(),
                                        .qkv_row_stride = stride,
                                        .positions = d_positions.data(),
                                        .slot_mapping = d_slots.data(),
                                        .inv_freq = d_inv_freq.data(),
                                        .cache = {.k = d_k.data(),
                                                  .v = d_v.data(),
                                                  .num_blocks = num_blocks,
                                                  .block_size = rc.block_size,
                                                  .num_kv_heads = rc.num_kv_heads,
                                                  .head_dim = d},
                                        .num_tokens = tokens,
                                        .num_heads = rc.num_heads,
                                        .style = rc.style,
                                        .dtype = type};
      ASSERT_TRUE(kernels::launch_rope_kv_cache(params, nullptr).ok());

      // Reference: split, rotate with the CPU oracle.
      std::vector<float> q(static_cast<std::size_t>(tokens * rc.num_heads * d));
      std::vector<float> k(static_cast<std::size_t>(tokens * rc.num_kv_heads * d));
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::copy_n(qkv.begin() + t * stride, rc.num_heads * d, q.begin() + t * rc.num_heads * d);
        std::copy_n(qkv.begin() + t * stride + rc.num_heads * d, rc.num_kv_heads * d,
                    k.begin() + t * rc.num_kv_heads * d);
      }
      cpu::apply_rope_reference(
          inv_freq.data(),
          rc.style == kernels::RopeStyle::kRotateHalf ? cpu::RopeStyle::kRotateHalf
                                                      : cpu::RopeStyle::kAdjacentPairs,
          positions.data(), tokens, q.data(), rc.num_heads, k.data(), rc.num_kv_heads, d);
      const std::string what = std::string(gpu_test::name_of(type)) + " d " + std::to_string(d) +
                               " heads " + std::to_string(rc.num_heads) + "/" +
                               std::to_string(rc.num_kv_heads) + " tokens " +
                               std::to_string(tokens) + " stride " + std::to_string(stride);
      const std::vector<float> got_qkv = d_qkv.download();
      std::vector<float> got_q(q.size());
      for (std::int64_t t = 0; t < tokens; ++t) {
        std::copy_n(got_qkv.begin() + t * stride, rc.num_heads * d,
                    got_q.begin() + t * rc.num_heads * d);
      }
      // sincosf vs std::cos/sin differ by an ulp or two in fp32.
      gpu_test::expect_close(got_q, q, tolerance(type) + 1e-6, what + " q");
      std::size_t changed = 0;  // k, v and the extra columns stay as they were in qkv
      for (std::int64_t t = 0; t < tokens; ++t) {
        for (std::int64_t e = rc.num_heads * d; e < stride; ++e) {
          const auto idx = static_cast<std::size_t>(t * stride + e);
          if (got_qkv[idx] != qkv[idx]) ++changed;
        }
      }
      EXPECT_EQ(changed, 0u) << what << ": qkv changed outside q";

      const std::vector<float> got_k = d_k.download();
      const std::vector<float> got_v = d_v.download();
      std::vector<bool> written(cache_elems, false);
      std::vector<float> got_k_rows, want_k_rows, got_v_rows, want_v_rows;
      for (std::int64_t t = 0; t < tokens; ++t) {
        if (slots[t] < 0) continue;
        const std::int64_t block = slots[t] / rc.block_size;
        const std::int64_t offset = slots[t] % rc.block_size;
        for (std::int64_t h = 0; h < rc.num_kv_heads; ++h) {
          for (std::int64_t e = 0; e < d; ++e) {
            const auto idx = static_cast<std::size_t>(
                ((block * rc.num_kv_heads + h) * rc.block_size + offset) * d + e);
            written[idx] = true;
            got_k_rows.push_back(got_k[idx]);
            want_k_rows.push_back(k[(t * rc.num_kv_heads + h) * d + e]);
            got_v_rows.push_back(got_v[idx]);
            want_v_rows.push_back(qkv[t * stride + (rc.num_heads + rc.num_kv_heads + h) * d + e]);
          }
        }
      }
      gpu_test::expect_close(got_k_rows, want_k_rows, tolerance(type) + 1e-6, what + " k cache");
      EXPECT_EQ(got_v_rows, want_v_rows) << what << " v cache";
      std::size_t touched = 0;
      for (std::size_t i = 0; i < cache_elems; ++i) {
        if (!written[i] && !(std::isnan(got_k[i]) && std::isnan(got_v[i]))) ++touched;
      }
      EXPECT_EQ(touched, 0u) << what << ": slots outside slot_mapping were written";
    }
  }
}

}  // namespace
}  // namespace pagoda
