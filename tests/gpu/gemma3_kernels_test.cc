// The CUDA kernels Gemma 3 added, against the CPU: paged prefill and decode attention at head_dim
// 256 and with sliding windows (cpu::windowed_attention_reference, in double), with one and many
// decode splits (splits wholly before the window must weigh nothing); the GeGLU gate
// (cpu::gelu_tanh_mul_reference); the scaled embedding.
//
// Attention tolerances are paged_attention_test.cc's: inputs rounded to the dtype on both sides,
// so relative L2 <= 2u + 2e-5 (fp32 accumulation, one final rounding).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/gelu_tanh.h"
#include "kernels/activation/gelu_tanh_mul.h"
#include "kernels/embedding/scaled_embedding.h"
#include "tests/gpu/attention_test_batch.h"

namespace pagoda {
namespace {

using cuda::ScalarType;
using gpu_test::AttentionBatch;
using gpu_test::AttentionCase;

double attention_tolerance(ScalarType type) {
  return 2.0 * gpu_test::unit_roundoff(type) + 2e-5;
}

TEST(GpuGemma3Attention, PrefillWithHeadDim256AndWindowsMatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(29);
  // The emulation's: the same features at fewer heads, queries and keys (windows of 128).
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          // Gemma 3 270M: 4 q heads on 1 KV head, head_dim 256; full and 512-token window.
          {{{1, 1}, {17, 17}}, 256, 4, 1, 16},
          {{{700, 700}}, 256, 4, 1, 16, 512},
          {{{64, 1300}, {1, 600}}, 256, 4, 1, 16, 512},  // a late chunk: window from mid-cache
          {{{40, 40}, {33, 90}}, 256, 8, 1, 64, 7},      // group 8, window shorter than a key tile
          {{{100, 100}}, 64, 8, 2, 16, 1},               // window 1: each query sees itself only
          {{{513, 513}, {3, 40}}, 128, 16, 2, 16, 33},
      },
      {
          {{{1, 1}, {17, 17}}, 256, 4, 1, 16},
          {{{300, 300}}, 256, 2, 1, 16, 128},
          {{{64, 500}, {1, 300}}, 256, 2, 1, 16, 128},
          {{{40, 40}, {33, 90}}, 256, 8, 1, 64, 7},
          {{{100, 100}}, 64, 8, 2, 16, 1},
          {{{150, 150}, {3, 40}}, 128, 4, 2, 16, 33},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionBatch batch(c, type, rng);
      std::vector<float> out;
      for (auto kernel : {kernels::PrefillKernel::kAuto, kernels::PrefillKernel::kReference}) {
        const Status s = batch.run_prefill(kernel, &out);
        ASSERT_TRUE(s.ok()) << s.to_string();
        gpu_test::expect_close(out, batch.want(), attention_tolerance(type),
                               gpu_test::describe(c, type) + " prefill");
      }
    }
  }
}

TEST(GpuGemma3Attention, MmaPrefillRefusesWhatItCannotRun) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(30);
  std::vector<float> out;
  // head_dim 256 runs 16 rows a warp only; windows only at head_dim 256.
  AttentionBatch wide({{{8, 8}}, 256, 4, 1, 16}, ScalarType::kBF16, rng);
  EXPECT_EQ(wide.run_prefill(kernels::PrefillKernel::kMma32, &out).code(),
            StatusCode::kUnimplemented);
  AttentionBatch windowed({{{8, 8}}, 128, 4, 1, 16, 4}, ScalarType::kBF16, rng);
  EXPECT_EQ(windowed.run_prefill(kernels::PrefillKernel::kMma32, &out).code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(windowed.run_prefill(kernels::PrefillKernel::kMma16, &out).code(),
            StatusCode::kUnimplemented);
}

TEST(GpuGemma3Attention, DecodeWithHeadDim256AndWindowsMatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  const std::vector<AttentionCase> cases = gpu_test::pick<AttentionCase>(
      {
          {{{1, 1}, {1, 17}, {1, 700}}, 256, 4, 1, 16},
          {{{1, 1300}, {1, 513}, {1, 5}}, 256, 4, 1, 16, 512},
          {{{1, 900}, {1, 30}}, 256, 8, 2, 64, 100},
          {{{1, 300}}, 256, 1, 1, 16, 1},
          {{{1, 4097}, {1, 17}}, 128, 32, 8, 16, 1024},
          {{{1, 600}, {1, 64}}, 64, 8, 1, 16, 64},
      },
      {
          {{{1, 1}, {1, 17}, {1, 300}}, 256, 4, 1, 16},
          {{{1, 600}, {1, 200}, {1, 5}}, 256, 4, 1, 16, 128},
          {{{1, 400}, {1, 30}}, 256, 4, 2, 64, 100},
          {{{1, 300}}, 256, 1, 1, 16, 1},
          {{{1, 700}, {1, 17}}, 128, 8, 2, 16, 256},
          {{{1, 600}, {1, 64}}, 64, 8, 1, 16, 64},
      });
  for (ScalarType type : gpu_test::kAllTypes) {
    for (const AttentionCase& c : gpu_test::cases_in(gpu_test::kAllTypes, type, cases)) {
      AttentionBatch batch(c, type, rng);
      const std::string what = gpu_test::describe(c, type);
      const auto longest = static_cast<int>(batch.max_seq_len());
      for (const kernels::DecodeSplitPlan plan :
           {kernels::DecodeSplitPlan{.num_splits = 1, .partition_size = longest},
            kernels::DecodeSplitPlan{.num_splits = (longest + 15) / 16, .partition_size = 16},
            kernels::DecodeSplitPlan{.num_splits = (longest + 99) / 100, .partition_size = 100}}) {
        for (const kernels::DecodeKernel kernel :
             {kernels::DecodeKernel::kRegisters, kernels::DecodeKernel::kPipelined}) {
          std::vector<float> out;
          const Status s = batch.run_decode(plan, &out, kernel);
          ASSERT_TRUE(s.ok()) << s.to_string();
          gpu_test::expect_close(
              out, batch.want(), attention_tolerance(type),
              what + " decode splits " + std::to_string(plan.num_splits) +
                  (kernel == kernels::DecodeKernel::kPipelined ? " (pipelined)" : " (registers)"));
        }
      }
    }
  }
}

TEST(GpuGemma3Kernels, GeluTanhMulMatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(32);
  for (ScalarType type : gpu_test::kAllTypes) {
    for (std::int64_t width : {1, 7, 640, 2048, 2051}) {
      const std::int64_t tokens = 5;
      const std::int64_t stride = 2 * width + 3;  // a row stride wider than gate + up
      std::vector<float> gate_up =
          gpu_test::round_to(gpu_test::random_vector(tokens * stride, rng, -8.0f, 8.0f), type);
      std::vector<float> want(tokens * width);
      for (std::int64_t t = 0; t < tokens; ++t) {
        cpu::gelu_tanh_mul_reference(gate_up.data() + t * stride,
                                     gate_up.data() + t * stride + width, width,
                                     want.data() + t * width);
      }
      gpu_test::DeviceArray d_in(gate_up, type);
      gpu_test::DeviceArray d_out(want.size(), type);
      d_out.poison();
      const Status s = kernels::launch_gelu_tanh_mul({.gate_up = d_in.data(),
                                                      .gate_up_row_stride = stride,
                                                      .out = d_out.data(),
                                                      .num_tokens = tokens,
                                                      .width = width,
                                                      .dtype = type},
                                                     nullptr);
      ASSERT_TRUE(s.ok()) << s.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // fp32 math then one rounding to the dtype; expf against the double tanh: ~1e-6.
      gpu_test::expect_close(
          d_out.download(), want, gpu_test::unit_roundoff(type) + 2e-6,
          std::string(gpu_test::name_of(type)) + " width " + std::to_string(width));
    }
  }
}

TEST(GpuGemma3Kernels, ScaledEmbeddingMatchesCpu) {
  PAGODA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(33);
  for (ScalarType type : gpu_test::kAllTypes) {
    const std::int64_t rows = 50, hidden = 640;
    const std::vector<float> table =
        gpu_test::round_to(gpu_test::random_vector(rows * hidden, rng), type);
    const std::vector<std::int32_t> ids = {3, 0, 49, 3, 17};
    const float scale = 25.25f;  // sqrt(640) in bf16
    std::vector<float> want;
    for (std::int32_t id : ids) {
      for (std::int64_t i = 0; i < hidden; ++i) want.push_back(table[id * hidden + i] * scale);
    }
    want = gpu_test::round_to(want, type);
    gpu_test::DeviceArray d_table(table, type);
    gpu_test::DeviceArray d_out(want.size(), type);
    gpu_test::DeviceVector<std::int32_t> d_ids(ids);
    d_out.poison();
    const Status s =
        kernels::launch_scaled_embedding({.table = d_table.data(),
                                          .ids = d_ids.data(),
                                          .out = d_out.data(),
                                          .num_table_rows = rows,
                                          .num_tokens = static_cast<std::int64_t>(ids.size()),
                                          .hidden = hidden,
                                          .dtype = type},
                                         scale, nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    gpu_test::expect_close(d_out.download(), want, 0.0, gpu_test::name_of(type));
  }
}

}  // namespace
}  // namespace pagoda
