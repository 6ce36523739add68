// The CPU executor's interleaving of a model's matrices at load (models/interleave_weights.h):
// which views it replaces, which it leaves alone, that the panels hold the file's rows, and that
// the GPU upload refuses them.
#include "models/interleave_weights.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/interleaved_rows.h"
#include "models/device_linear_plan.h"

namespace pagoda::models {
namespace {

// Rows of random bytes: every byte pattern repacks, and nothing here decodes them.
struct Matrix {
  std::vector<std::uint8_t> bytes;
  cpu::TensorView view;
};

Matrix random_matrix(std::mt19937_64& rng, DType dtype, std::int64_t rows, std::int64_t cols) {
  Matrix m;
  m.view = cpu::dense_view(nullptr, dtype, rows, cols);
  m.bytes.resize(static_cast<std::size_t>(rows) * m.view.row_stride);
  for (std::uint8_t& b : m.bytes) b = static_cast<std::uint8_t>(rng());
  m.view.data = m.bytes.data();
  return m;
}

// `w` holds the rows of `m` (interleaved or not).
bool same_rows(const cpu::TensorView& w, const Matrix& m) {
  if (w.num_rows != m.view.num_rows || w.row_stride != m.view.row_stride) return false;
  std::vector<std::uint8_t> scratch;
  for (std::int64_t r = 0; r < w.num_rows; ++r) {
    if (std::memcmp(cpu::gguf_row(w, r, scratch), m.view.row(r), w.row_stride) != 0) return false;
  }
  return true;
}

TEST(InterleaveWeightsTest, ReplacesTheDecodeMatricesOnly) {
  std::mt19937_64 rng(7);
  const std::int64_t hidden = 256, intermediate = 512, vocab = 40;
  // Layer 0 of Q4_K and Q6_K (a Q4_K_M mix); layer 1 with an F16 view, which has no panels, and
  // an act-order (permuted) Q8_0 view, which the panels do not take.
  Matrix embed = random_matrix(rng, DType::kQ6_K, vocab, hidden);
  std::vector<Matrix> layer0 = {
      random_matrix(rng, DType::kQ4_K, hidden, hidden),        // q
      random_matrix(rng, DType::kQ4_K, 64, hidden),            // k
      random_matrix(rng, DType::kQ6_K, 64, hidden),            // v
      random_matrix(rng, DType::kQ4_K, hidden, hidden),        // o
      random_matrix(rng, DType::kQ4_K, intermediate, hidden),  // gate
      random_matrix(rng, DType::kQ4_K, intermediate, hidden),  // up
      random_matrix(rng, DType::kQ6_K, hidden, intermediate),  // down
  };
  std::vector<Matrix> layer1 = {
      random_matrix(rng, DType::kQ8_0, hidden, hidden),  // q
      random_matrix(rng, DType::kF16, 64, hidden),       // k: kept
      random_matrix(rng, DType::kQ4_0, 64, hidden),      // v
      random_matrix(rng, DType::kQ4_1, hidden, hidden),  // o
      random_matrix(rng, DType::kQ8_0, 17, hidden),      // gate: two panels, one part empty
      random_matrix(rng, DType::kQ8_0, 17, hidden),      // up: permuted below, kept
      random_matrix(rng, DType::kQ4_0, hidden, 96),      // down
  };
  // The initializer lists copied the bytes.
  for (std::vector<Matrix>* layer : {&layer0, &layer1}) {
    for (Matrix& m : *layer) m.view.data = m.bytes.data();
  }
  std::vector<std::int32_t> permutation(static_cast<std::size_t>(hidden));
  for (std::size_t j = 0; j < permutation.size(); ++j) {
    permutation[j] = static_cast<std::int32_t>(permutation.size() - 1 - j);
  }
  layer1[5].view.input_permutation = permutation.data();

  LlamaWeights w;
  w.embed_tokens = embed.view;
  w.lm_head = embed.view;  // tied
  for (const std::vector<Matrix>* layer : {&layer0, &layer1}) {
    const std::vector<Matrix>& l = *layer;
    LlamaLayerWeights lw;
    lw.q_proj = l[0].view;
    lw.k_proj = l[1].view;
    lw.v_proj = l[2].view;
    lw.o_proj = l[3].view;
    lw.gate_proj = l[4].view;
    lw.up_proj = l[5].view;
    lw.down_proj = l[6].view;
    w.layers.push_back(lw);
  }

  cpu::ThreadPool pool(3);
  const InterleaveSummary summary = interleave_for_decode(w, pool);

  // 7 + 5 layer matrices (not layer 1's F16 k_proj nor its permuted up_proj) and the LM head.
  EXPECT_EQ(summary.num_matrices, 13);
  ASSERT_EQ(w.interleaved.size(), 13u);
  // Whole panels: 17 rows take two, 40 three.
  std::size_t want_bytes = (vocab + 8) * embed.view.row_stride;
  for (const std::vector<Matrix>* layer : {&layer0, &layer1}) {
    for (const Matrix& m : *layer) {
      if (m.view.dtype == DType::kF16 || m.view.input_permutation != nullptr) continue;
      want_bytes += static_cast<std::size_t>((m.view.num_rows + 15) / 16 * 16) * m.view.row_stride;
    }
  }
  EXPECT_EQ(summary.bytes, want_bytes);
  std::size_t bytes = 0;
  for (const auto& m : w.interleaved) bytes += m->bytes.size();
  EXPECT_EQ(bytes, want_bytes);

  EXPECT_FALSE(w.embed_tokens.interleaved);
  EXPECT_EQ(w.embed_tokens.data, embed.bytes.data()) << "the embedding keeps the file's rows";
  EXPECT_TRUE(w.lm_head.interleaved);
  EXPECT_TRUE(same_rows(w.lm_head, embed));
  for (std::size_t layer = 0; layer < 2; ++layer) {
    const LlamaLayerWeights& lw = w.layers[layer];
    const std::vector<Matrix>& want = layer == 0 ? layer0 : layer1;
    const cpu::TensorView* got[] = {&lw.q_proj,    &lw.k_proj,  &lw.v_proj,   &lw.o_proj,
                                    &lw.gate_proj, &lw.up_proj, &lw.down_proj};
    for (std::size_t i = 0; i < 7; ++i) {
      SCOPED_TRACE("layer " + std::to_string(layer) + " matrix " + std::to_string(i));
      const bool kept = layer == 1 && (i == 1 || i == 5);
      EXPECT_EQ(got[i]->interleaved, !kept);
      EXPECT_EQ(got[i]->data == want[i].bytes.data(), kept);
      EXPECT_EQ(got[i]->dtype, want[i].view.dtype);
      EXPECT_EQ(got[i]->num_cols, want[i].view.num_cols);
      EXPECT_TRUE(same_rows(*got[i], want[i]));
    }
  }
  EXPECT_EQ(w.layers[1].up_proj.input_permutation, permutation.data());

  // Run again, nothing is left to interleave.
  const InterleaveSummary again = interleave_for_decode(w, pool);
  EXPECT_EQ(again.num_matrices, 0);
  EXPECT_EQ(w.interleaved.size(), 13u);
}

// Interleaving is the CPU executor's alone: the GPU's forms stack the file's rows, and an
// interleaved view reaching them is a broken invariant, not a silently wrong upload.
TEST(InterleaveWeightsDeathTest, GpuUploadRefusesInterleavedViews) {
  std::mt19937_64 rng(8);
  const Matrix m = random_matrix(rng, DType::kQ4_0, 32, 64);
  const cpu::InterleavedMatrix panels = cpu::interleave_rows(m.view);
  const std::span<const cpu::TensorView> parts(&panels.view, 1);
  EXPECT_DEATH(device_linear_kind(parts, true), "interleaved");
  EXPECT_DEATH((void)w4a16_layout(parts), "interleaved");
  EXPECT_DEATH((void)concatenate_rows(parts), "interleaved");
}

// PAGODA_CPU_INTERLEAVE=0 always keeps the file's rows; "1" interleaves on every AVX2 CPU without
// AMX; unset, AVX-512 VNNI CPUs (without AMX) interleave, and AVX2 ones only for an engine of one
// sequence at a time. All with int16 activations on.
TEST(InterleaveWeightsTest, SwitchFollowsTheEnvironmentTheCpuAndTheBatch) {
  const char* before = std::getenv("PAGODA_CPU_INTERLEAVE");
  const std::string saved = before != nullptr ? before : "";
  const bool int16 = cpu::cpu_int16_activations() && !cpu::cpu_has_amx_int8();
  for (const std::int64_t max_num_seqs : {0, 1, 2, 256}) {
    SCOPED_TRACE("max_num_seqs " + std::to_string(max_num_seqs));
    ::setenv("PAGODA_CPU_INTERLEAVE", "0", 1);
    EXPECT_FALSE(cpu::cpu_interleave_weights(max_num_seqs));
    ::setenv("PAGODA_CPU_INTERLEAVE", "1", 1);
    EXPECT_EQ(cpu::cpu_interleave_weights(max_num_seqs), int16 && cpu::cpu_has_avx2());
    ::unsetenv("PAGODA_CPU_INTERLEAVE");
    EXPECT_EQ(cpu::cpu_interleave_weights(max_num_seqs),
              int16 && (cpu::cpu_has_avx512_vnni() || (cpu::cpu_has_avx2() && max_num_seqs == 1)));
    // Int8 activations on AVX-VNNI take the panels for every engine.
    const cpu::CpuActivations asked = cpu::cpu_activations();
    cpu::set_cpu_activations(cpu::CpuActivations::kInt8);
    EXPECT_EQ(cpu::cpu_interleave_weights(max_num_seqs),
              int16 && (cpu::cpu_has_avx512_vnni() || cpu::cpu_int16_avx_vnni() ||
                        (cpu::cpu_has_avx2() && max_num_seqs == 1)));
    cpu::set_cpu_activations(asked);
  }
  if (before != nullptr) ::setenv("PAGODA_CPU_INTERLEAVE", saved.c_str(), 1);
}

}  // namespace
}  // namespace pagoda::models
