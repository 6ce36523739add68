// The host side of the GPU's quantized linear layers: which form each layer takes and the
// stacking of a fused layer's quantized parts (models/device_linear_plan.h). Stacked rows must
// decode to exactly the parts' rows, in order, under the parts' one permutation.
#include "models/device_linear_plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "../backend/test_random.h"
#include "backend/cpu/row_decoder.h"
#include "model/dequantize.h"
#include "model/model_files.h"
#include "models/llama_weights.h"
#include "quant/float_codes.h"
#include "quant/fp8_weights.h"
#include "quant/gguf_repack.h"
#include "quant/int4_rtn.h"

namespace pagoda::models {
namespace {

ModelTensor f32_tensor(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  return ModelTensor{"w",
                     DType::kF32,
                     {static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols)},
                     std::span(reinterpret_cast<const std::uint8_t*>(values.data()),
                               values.size() * sizeof(float))};
}

std::vector<float> random_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

quant::QuantizedMatrix int4(std::int64_t rows, std::int64_t cols, std::uint32_t seed,
                            std::int64_t group_size = 128) {
  const std::vector<float> w = random_values(rows * cols, seed);
  auto q = quant::quantize_int4_rtn("w", f32_tensor(w, rows, cols), rows, cols, group_size);
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return std::move(*q);
}

quant::QuantizedMatrix fp8(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  const std::vector<float> w = random_values(rows * cols, seed);
  auto q = quant::quantize_fp8_per_channel("w", f32_tensor(w, rows, cols), rows, cols);
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return std::move(*q);
}

cpu::TensorView view_of(const quant::QuantizedMatrix& m) {
  cpu::TensorView v = cpu::dense_view(m.bytes.data(), m.dtype, m.rows, m.cols);
  if (!m.input_permutation.empty()) v.input_permutation = m.input_permutation.data();
  return v;
}

std::vector<float> decoded_row(const cpu::TensorView& v, std::int64_t r) {
  std::vector<float> out(static_cast<std::size_t>(v.num_cols));
  cpu::decode_row(v, r, 0, v.num_cols, out.data());
  return out;
}

std::size_t bytes_of(const cpu::TensorView& v) {
  const DTypeInfo& info = dtype_info(v.dtype);
  return static_cast<std::size_t>(v.num_rows * (v.num_cols / info.block_size) * info.block_bytes);
}

// Row r as the reference dequantizer (model/dequantize.h, the oracle) gives it.
std::vector<float> reference_row(const cpu::TensorView& v, std::int64_t r) {
  std::vector<float> out(static_cast<std::size_t>(v.num_cols));
  const Status s = dequantize(v.dtype, std::span(v.row(r), bytes_of(v) / v.num_rows), out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}

TEST(DeviceLinearPlan, QuantizedLayersStayQuantizedWith16BitActivations) {
  const quant::QuantizedMatrix q = int4(16, 256, 1), k = int4(8, 256, 2), f = fp8(16, 256, 3);
  const std::vector<float> dense(16 * 256, 0.5f);
  const cpu::TensorView qkv[] = {view_of(q), view_of(k), view_of(k)};
  EXPECT_EQ(device_linear_kind(qkv, true), DeviceLinearKind::kW4A16);
  const cpu::TensorView f8[] = {view_of(f)};
  EXPECT_EQ(device_linear_kind(f8, true), DeviceLinearKind::kFp8);
  const cpu::TensorView plain[] = {cpu::dense_view(dense.data(), DType::kF32, 16, 256)};
  EXPECT_EQ(device_linear_kind(plain, true), DeviceLinearKind::kDense);
  // GGUF Q4_0 rows (18-byte blocks) are 4-bit too; Q8_0 keeps its 8-bit codes.
  const std::vector<std::uint8_t> q4_0(16 * 8 * 18, 0x11);
  const cpu::TensorView gguf[] = {cpu::dense_view(q4_0.data(), DType::kQ4_0, 16, 256)};
  EXPECT_EQ(device_linear_kind(gguf, true), DeviceLinearKind::kW4A16);
  const std::vector<std::uint8_t> q8_0(16 * 8 * 34, 0x11);
  const cpu::TensorView gguf8[] = {cpu::dense_view(q8_0.data(), DType::kQ8_0, 16, 256)};
  EXPECT_EQ(device_linear_kind(gguf8, true), DeviceLinearKind::kW8A16);
  // FP32 activations: the 4-bit and FP8 kernels take 16-bit ones, so everything is dense.
  EXPECT_EQ(device_linear_kind(qkv, false), DeviceLinearKind::kDense);
  EXPECT_EQ(device_linear_kind(f8, false), DeviceLinearKind::kDense);
  EXPECT_EQ(device_linear_kind_name(DeviceLinearKind::kW4A16), "w4a16");
}

TEST(DeviceLinearPlan, PartsThatCannotShareOneMatrixAreDense) {
  const quant::QuantizedMatrix a = int4(16, 256, 1), b = int4(8, 256, 2), f = fp8(8, 256, 3);
  const quant::QuantizedMatrix narrow = int4(8, 128, 4);
  const cpu::TensorView mixed[] = {view_of(a), view_of(f)};
  EXPECT_EQ(device_linear_kind(mixed, true), DeviceLinearKind::kDense);
  EXPECT_FALSE(concatenate_rows(mixed).ok());
  const cpu::TensorView widths[] = {view_of(a), view_of(narrow)};
  EXPECT_EQ(device_linear_kind(widths, true), DeviceLinearKind::kDense);

  // Act-order: the same column order in every part stacks; different orders do not.
  std::vector<std::int32_t> p1(256), p2(256);
  std::iota(p1.begin(), p1.end(), 0);
  std::mt19937 rng(5);
  std::shuffle(p1.begin(), p1.end(), rng);
  p2 = p1;
  cpu::TensorView va = view_of(a), vb = view_of(b);
  va.input_permutation = p1.data();
  vb.input_permutation = p2.data();  // equal contents, another array
  const cpu::TensorView same[] = {va, vb};
  EXPECT_EQ(device_linear_kind(same, true), DeviceLinearKind::kW4A16);
  std::swap(p2[0], p2[1]);
  EXPECT_EQ(device_linear_kind(same, true), DeviceLinearKind::kDense);
  cpu::TensorView unpermuted = view_of(b);
  const cpu::TensorView one_permuted[] = {va, unpermuted};
  EXPECT_EQ(device_linear_kind(one_permuted, true), DeviceLinearKind::kDense);
}

TEST(DeviceLinearPlan, BlockScaledFp8IsDense) {
  quant::QuantizedMatrix f = fp8(4, 128, 7);
  // Give row 2's third block its own scale, as a 128-column block-scaled checkpoint would.
  const float other = 0.125f;
  std::memcpy(f.bytes.data() + 2 * f.row_bytes() + 2 * 36, &other, sizeof(other));
  const cpu::TensorView v[] = {view_of(f)};
  EXPECT_EQ(device_linear_kind(v, true), DeviceLinearKind::kDense);
}

TEST(DeviceLinearPlan, StackedRowsDecodeToThePartsRows) {
  const quant::QuantizedMatrix q = int4(24, 256, 11), k = int4(8, 256, 12), v = int4(8, 256, 13);
  std::vector<std::int32_t> perm(256);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(6);
  std::shuffle(perm.begin(), perm.end(), rng);
  cpu::TensorView parts[] = {view_of(q), view_of(k), view_of(v)};
  for (cpu::TensorView& p : parts) p.input_permutation = perm.data();
  auto stacked = concatenate_rows(parts);
  ASSERT_TRUE(stacked.ok()) << stacked.status().to_string();
  EXPECT_EQ(stacked->dtype, DType::kQ4_Z);
  EXPECT_EQ(stacked->rows, 40);
  EXPECT_EQ(stacked->cols, 256);
  EXPECT_EQ(stacked->group_size, 128);
  EXPECT_EQ(stacked->input_permutation, perm);
  const cpu::TensorView all = view_of(*stacked);
  std::int64_t row = 0;
  for (const cpu::TensorView& p : parts) {
    for (std::int64_t r = 0; r < p.num_rows; ++r, ++row) {
      ASSERT_EQ(decoded_row(all, row), decoded_row(p, r)) << "stacked row " << row;
    }
  }

  const quant::QuantizedMatrix g = fp8(16, 96, 14), u = fp8(16, 96, 15);
  const cpu::TensorView gate_up[] = {view_of(g), view_of(u)};
  auto f8 = concatenate_rows(gate_up);
  ASSERT_TRUE(f8.ok()) << f8.status().to_string();
  EXPECT_EQ(f8->dtype, DType::kF8_S);
  EXPECT_TRUE(f8->input_permutation.empty());
  EXPECT_EQ(decoded_row(view_of(*f8), 17), decoded_row(gate_up[1], 1));
  EXPECT_EQ(decoded_row(view_of(*f8), 3), decoded_row(gate_up[0], 3));
}

// What the GPU is handed for a fused layer holds, weight for weight, what the CPU multiplies:
// row r of the stacked layout is row r of the parts one after another, in stored column order,
// with the parts' permutation.
TEST(DeviceLinearPlan, W4A16LayoutHoldsThePartsWeights) {
  const quant::QuantizedMatrix q = int4(24, 256, 31), k = int4(8, 256, 32), v = int4(8, 256, 33);
  std::vector<std::int32_t> perm(256);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(7);
  std::shuffle(perm.begin(), perm.end(), rng);
  cpu::TensorView parts[] = {view_of(q), view_of(k), view_of(v)};
  for (cpu::TensorView& p : parts) p.input_permutation = perm.data();
  auto layout = w4a16_layout(parts);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->rows, 40);
  EXPECT_EQ(layout->cols, 256);
  EXPECT_EQ(layout->group_size, 128);
  EXPECT_EQ(layout->input_permutation, perm);
  std::int64_t row = 0;
  for (const cpu::TensorView& p : parts) {
    for (std::int64_t r = 0; r < p.num_rows; ++r, ++row) {
      const std::vector<float> want = decoded_row(p, r);
      for (std::int64_t c = 0; c < 256; ++c) {
        ASSERT_EQ(quant::w4a16_weight(*layout, row, c), want[static_cast<std::size_t>(c)])
            << "row " << row << " col " << c;
      }
    }
  }
}

TEST(DeviceLinearPlan, W4A16LayoutOfGgufQ4_0) {
  // Two Q4_0 parts of 8 rows x 64 columns: fp16 d, then 16 bytes of nibbles per 32 weights.
  std::mt19937 rng(8);
  std::vector<std::uint8_t> a(8 * 2 * 18), b(8 * 2 * 18);
  for (auto* part : {&a, &b}) {
    for (std::size_t blk = 0; blk < part->size() / 18; ++blk) {
      const std::uint16_t d = quant::float_to_fp16(0.01f * static_cast<float>(1 + rng() % 50));
      (*part)[blk * 18] = static_cast<std::uint8_t>(d & 0xFF);
      (*part)[blk * 18 + 1] = static_cast<std::uint8_t>(d >> 8);
      for (int j = 0; j < 16; ++j) (*part)[blk * 18 + 2 + j] = static_cast<std::uint8_t>(rng());
    }
  }
  const cpu::TensorView parts[] = {cpu::dense_view(a.data(), DType::kQ4_0, 8, 64),
                                   cpu::dense_view(b.data(), DType::kQ4_0, 8, 64)};
  ASSERT_EQ(device_linear_kind(parts, true), DeviceLinearKind::kW4A16);
  auto layout = w4a16_layout(parts);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->rows, 16);
  for (std::int64_t row = 0; row < 16; ++row) {
    const std::vector<float> want = decoded_row(parts[row / 8], row % 8);
    for (std::int64_t c = 0; c < 64; ++c) {
      ASSERT_EQ(quant::w4a16_weight(*layout, row, c), want[static_cast<std::size_t>(c)])
          << "row " << row << " col " << c;
    }
  }
}

TEST(DeviceLinearPlan, GgufTypesStayQuantized) {
  std::mt19937_64 rng(9);
  const std::vector<std::pair<DType, DeviceLinearKind>> kinds = {
      {DType::kQ4_1, DeviceLinearKind::kW4A16}, {DType::kQ4_K, DeviceLinearKind::kW4A16},
      {DType::kQ5_0, DeviceLinearKind::kW8A16}, {DType::kQ5_1, DeviceLinearKind::kW8A16},
      {DType::kQ8_0, DeviceLinearKind::kW8A16}, {DType::kQ5_K, DeviceLinearKind::kW8A16},
      {DType::kQ6_K, DeviceLinearKind::kW8A16}, {DType::kQ3_K, DeviceLinearKind::kW4A16},
      {DType::kQ2_K, DeviceLinearKind::kW4A16}, {DType::kF16, DeviceLinearKind::kDense}};
  for (const auto& [dtype, kind] : kinds) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const auto a = cpu::testing::random_weights(rng, dtype, 24, 512);
    const auto b = cpu::testing::random_weights(rng, dtype, 8, 512);
    const cpu::TensorView parts[] = {cpu::dense_view(a.data(), dtype, 24, 512),
                                     cpu::dense_view(b.data(), dtype, 8, 512)};
    EXPECT_EQ(device_linear_kind(parts, true), kind);
    EXPECT_EQ(device_linear_kind(parts, false), DeviceLinearKind::kDense);
    auto bytes = planned_device_bytes(parts, true, 2);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    if (kind == DeviceLinearKind::kDense) {
      EXPECT_EQ(*bytes, 32u * 512 * 2);
      continue;
    }
    // The stacked layout holds the parts' weights, bit for bit as the CPU decodes them, and
    // takes the bytes the plan computed from the shapes.
    auto layout = w4a16_layout(parts);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(layout->wide_codes(), kind == DeviceLinearKind::kW8A16);
    EXPECT_EQ(*bytes, layout->device_bytes());
    for (std::int64_t row = 0; row < 32; ++row) {
      const std::vector<float> want =
          row < 24 ? reference_row(parts[0], row) : reference_row(parts[1], row - 24);
      for (std::int64_t c = 0; c < 512; ++c) {
        ASSERT_EQ(quant::w4a16_weight(*layout, row, c), want[static_cast<std::size_t>(c)])
            << "row " << row << " col " << c;
      }
    }
  }
  // A Q4_K_M file's Q4_K q/k with a Q6_K v share one matrix in the general GGUF form (the widest
  // codes, group 16, Q6_K's zero folded into a min term): every weight equal to the CPU's.
  const auto q = cpu::testing::random_weights(rng, DType::kQ4_K, 16, 512);
  const auto v = cpu::testing::random_weights(rng, DType::kQ6_K, 8, 512);
  const auto o = cpu::testing::random_weights(rng, DType::kQ8_0, 8, 512);
  const cpu::TensorView mixed[] = {cpu::dense_view(q.data(), DType::kQ4_K, 16, 512),
                                   cpu::dense_view(v.data(), DType::kQ6_K, 8, 512),
                                   cpu::dense_view(o.data(), DType::kQ8_0, 8, 512)};
  for (const std::size_t count : {2u, 3u}) {
    const auto parts = std::span(mixed, count);
    EXPECT_EQ(device_linear_kind(parts, true), DeviceLinearKind::kW8A16);
    auto layout = w4a16_layout(parts);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    EXPECT_EQ(layout->group_size, 16);
    EXPECT_EQ(layout->super_shift, count == 2 ? 4 : 1);
    auto bytes = planned_device_bytes(parts, true, 2);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(*bytes, layout->device_bytes());
    std::int64_t row = 0;
    for (const cpu::TensorView& p : parts) {
      for (std::int64_t r = 0; r < p.num_rows; ++r, ++row) {
        const std::vector<float> want = reference_row(p, r);
        for (std::int64_t c = 0; c < 512; ++c) {
          ASSERT_EQ(quant::w4a16_weight(*layout, row, c), want[static_cast<std::size_t>(c)])
              << "row " << row << " col " << c;
        }
      }
    }
  }
  EXPECT_EQ(device_linear_kind_name(DeviceLinearKind::kW8A16), "w8a16");
}

// The GPU memory a GGUF model's weights take after load, planned on the host (the figure issue 28
// asks for: about the file's size), for the local Q4_K_M files when present. The embedding (and
// an untied LM head) keeps its GGUF type's W4A16 form too (device_table_kind). A Q4_K_M file
// gives V (and down) Q6_K in some layers and Q, K Q4_K: those fused QKV layers take the general
// GGUF form (6-bit codes).
TEST(DeviceLinearPlan, GgufQ4KMModelNeedsAboutItsFileSizeOfGpuMemory) {
  int found = 0;
  for (const char* rel : {"/models/bench/llama-1b-shape.Q4_K_M.gguf",
                          "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf"}) {
    const std::string path = std::string(PAGODA_SOURCE_DIR) + rel;
    if (!std::filesystem::exists(path)) continue;
    ++found;
    SCOPED_TRACE(path);
    auto files = open_model_files(path);
    ASSERT_TRUE(files.ok()) << files.status().to_string();
    auto w = load_llama_weights(*files);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    std::size_t linear_file = 0, linear_gpu = 0, mixed_qkv = 0;
    for (const LlamaLayerWeights& l : w->layers) {
      const cpu::TensorView qkv[] = {l.q_proj, l.k_proj, l.v_proj};
      const cpu::TensorView gate_up[] = {l.gate_proj, l.up_proj};
      const std::span<const cpu::TensorView> layers[] = {qkv, std::span(&l.o_proj, 1), gate_up,
                                                         std::span(&l.down_proj, 1)};
      for (const auto parts : layers) {
        for (const cpu::TensorView& p : parts) linear_file += bytes_of(p);
        auto bytes = planned_device_bytes(parts, true, 2);
        ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
        linear_gpu += *bytes;
        EXPECT_NE(device_linear_kind(parts, true), DeviceLinearKind::kDense);
        bool mixed = false;
        for (const cpu::TensorView& p : parts) mixed = mixed || p.dtype != parts[0].dtype;
        mixed_qkv += mixed ? 1 : 0;
      }
    }
    const cpu::TensorView& e = w->embed_tokens;
    const bool tied = w->lm_head.data == e.data;
    EXPECT_NE(device_table_kind(e, true), DeviceLinearKind::kDense);
    EXPECT_EQ(device_table_kind(e, false), DeviceLinearKind::kDense);
    auto embed_bytes = planned_table_bytes(e, true, 2);
    ASSERT_TRUE(embed_bytes.ok()) << embed_bytes.status().to_string();
    std::size_t embed_gpu = *embed_bytes;
    if (!tied) {
      auto head_bytes = planned_table_bytes(w->lm_head, true, 2);
      ASSERT_TRUE(head_bytes.ok()) << head_bytes.status().to_string();
      embed_gpu += *head_bytes;
    }
    const std::size_t embed_file = bytes_of(e) + (tied ? 0 : bytes_of(w->lm_head));
    const auto file_size = static_cast<std::size_t>(std::filesystem::file_size(path));
    const double gib = 1 << 30;
    std::printf(
        "%s: file %.3f GiB; linear layers %.3f GiB in the file, %.3f GiB planned on the GPU "
        "(%.3fx; %zu of %zu QKV layers of mixed types); embedding%s %.3f GiB in the file, %.3f GiB "
        "planned; all weights %.3f GiB (%.3fx the file)\n",
        rel, file_size / gib, linear_file / gib, linear_gpu / gib,
        static_cast<double>(linear_gpu) / linear_file, mixed_qkv, w->layers.size(),
        tied ? "" : " + LM head", embed_file / gib, embed_gpu / gib, (linear_gpu + embed_gpu) / gib,
        static_cast<double>(linear_gpu + embed_gpu) / file_size);
    // 4.625 bits per Q4_K weight and 6.5625 per Q6_K one against the file's 4.5 and 6.5625, the
    // mixed QKV layers at 7.125 (llama-1b-shape: 1.05x). Gemma 3 270M's 640 columns are not whole
    // 256-blocks, so its file falls back to Q5_0 (5.75 bits on the GPU against 5.5) and Q8_0 for
    // many matrices (1.09x).
    EXPECT_LT(static_cast<double>(linear_gpu), 1.15 * static_cast<double>(linear_file));
    EXPECT_LT(static_cast<double>(embed_gpu), 1.15 * static_cast<double>(embed_file));
    EXPECT_LT(static_cast<double>(linear_gpu + embed_gpu), 1.15 * static_cast<double>(file_size));
  }
  if (found == 0) GTEST_SKIP() << "no local Q4_K_M model under models/";
}

// The same figure for Llama-3-8B in Q4_K_M (no such file here: the tensors' types follow the
// Q4_K_M recipe, V and down Q6_K in the layers where llama.cpp's quantizer spends more bits: the
// first and last eighth and every third between; token embedding Q4_K, output Q6_K). Views
// without data suffice: the plan reads only types and shapes for GGUF forms.
TEST(DeviceLinearPlan, Llama3_8BQ4KMPlannedGpuMemory) {
  const std::int64_t hidden = 4096, inter = 14336, q_dim = 4096, kv_dim = 1024, vocab = 128256;
  const int n = 32;
  const auto more_bits = [&](int i) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
  std::size_t linear_file = 0, linear_gpu = 0;
  for (int i = 0; i < n; ++i) {
    const DType v_down = more_bits(i) ? DType::kQ6_K : DType::kQ4_K;
    const cpu::TensorView qkv[] = {cpu::dense_view(nullptr, DType::kQ4_K, q_dim, hidden),
                                   cpu::dense_view(nullptr, DType::kQ4_K, kv_dim, hidden),
                                   cpu::dense_view(nullptr, v_down, kv_dim, hidden)};
    const cpu::TensorView o[] = {cpu::dense_view(nullptr, DType::kQ4_K, hidden, q_dim)};
    const cpu::TensorView gate_up[] = {cpu::dense_view(nullptr, DType::kQ4_K, inter, hidden),
                                       cpu::dense_view(nullptr, DType::kQ4_K, inter, hidden)};
    const cpu::TensorView down[] = {cpu::dense_view(nullptr, v_down, hidden, inter)};
    for (const std::span<const cpu::TensorView> parts :
         {std::span<const cpu::TensorView>(qkv), std::span<const cpu::TensorView>(o),
          std::span<const cpu::TensorView>(gate_up), std::span<const cpu::TensorView>(down)}) {
      for (const cpu::TensorView& p : parts) linear_file += bytes_of(p);
      auto bytes = planned_device_bytes(parts, true, 2);
      ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
      linear_gpu += *bytes;
    }
  }
  const cpu::TensorView embed = cpu::dense_view(nullptr, DType::kQ4_K, vocab, hidden);
  const cpu::TensorView head = cpu::dense_view(nullptr, DType::kQ6_K, vocab, hidden);
  const std::size_t tables_file = bytes_of(embed) + bytes_of(head);
  auto embed_gpu = planned_table_bytes(embed, true, 2);
  auto head_gpu = planned_table_bytes(head, true, 2);
  ASSERT_TRUE(embed_gpu.ok() && head_gpu.ok());
  const std::size_t tables_gpu = *embed_gpu + *head_gpu;
  const double gb = 1e9;
  const double file = static_cast<double>(linear_file + tables_file);
  const double all = static_cast<double>(linear_gpu + tables_gpu);
  std::printf(
      "Llama-3-8B Q4_K_M: linear layers %.2f GB in the file, %.2f GB planned on the GPU (%.3fx); "
      "embedding + LM head %.2f GB in the file, %.2f GB planned (bf16: %.2f GB); all weights "
      "%.2f GB against the file's %.2f GB of tensors (%.3fx)\n",
      linear_file / gb, linear_gpu / gb, static_cast<double>(linear_gpu) / linear_file,
      tables_file / gb, tables_gpu / gb, 2.0 * vocab * hidden * 2 / gb, all / gb, file / gb,
      all / file);
  EXPECT_LT(static_cast<double>(linear_gpu), 1.1 * static_cast<double>(linear_file));
  EXPECT_LT(all, 1.1 * file);
}

TEST(DeviceLinearPlan, Fp8LayoutHoldsThePartsWeights) {
  const quant::QuantizedMatrix g = fp8(16, 96, 41), u = fp8(12, 96, 42);
  const cpu::TensorView parts[] = {view_of(g), view_of(u)};
  auto layout = fp8_layout(parts);
  ASSERT_TRUE(layout.ok()) << layout.status().to_string();
  EXPECT_EQ(layout->rows, 28);
  EXPECT_EQ(layout->cols, 96);
  for (std::int64_t row = 0; row < 28; ++row) {
    const std::vector<float> want =
        row < 16 ? decoded_row(parts[0], row) : decoded_row(parts[1], row - 16);
    for (std::int64_t c = 0; c < 96; ++c) {
      const float got = layout->scales[static_cast<std::size_t>(row)] *
                        fp8_e4m3_to_float(layout->codes[static_cast<std::size_t>(row * 96 + c)]);
      ASSERT_EQ(got, want[static_cast<std::size_t>(c)]) << "row " << row << " col " << c;
    }
  }
}

TEST(DeviceLinearPlan, GroupSizeIsTheLargestExactOne) {
  EXPECT_EQ(uniform_q4_z_group_size(int4(8, 512, 21, 128)), 128);
  EXPECT_EQ(uniform_q4_z_group_size(int4(8, 512, 22, 32)), 32);
  EXPECT_EQ(uniform_q4_z_group_size(int4(8, 96, 23, 128)), 96);  // one short group: per channel
  // 160 columns in groups of 128 + 32: no single size but 32 describes it.
  EXPECT_EQ(uniform_q4_z_group_size(int4(8, 160, 24, 128)), 32);
}

}  // namespace
}  // namespace pagoda::models
