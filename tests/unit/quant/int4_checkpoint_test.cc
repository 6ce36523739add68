// GPTQ / AWQ repacking against golden layers dequantized by the numpy reference of
// tests/golden/quant/int4_formats.py (make_int4_golden.py). Q4_Z is exact, so every weight must
// match bit for bit, through the reference dequantizer and through the row decoder.
#include "quant/int4_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/row_decoder.h"
#include "backend/cpu/tensor_view.h"
#include "model/dequantize.h"
#include "model/safetensors_file.h"

namespace pagoda::quant {
namespace {

const std::string kDataDir = std::string(PAGODA_TEST_DATA_DIR) + "/quant/";

class Int4Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto file = SafetensorsFile::open(kDataDir + "int4_layers.safetensors");
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    file_ = std::move(*file);
    for (const SafetensorsTensor& t : file_->tensors()) {
      tensors_->emplace(t.name, ModelTensor{t.name, t.dtype, t.shape, t.data});
    }
    std::ifstream in(kDataDir + "int4_layers.json");
    std::stringstream text;
    text << in.rdbuf();
    *cases_ = nlohmann::json::parse(text.str())["cases"];
  }

  static const ModelTensor* tensor(const std::string& name) {
    auto it = tensors_->find(name);
    return it == tensors_->end() ? nullptr : &it->second;
  }

  static QuantizationConfig config_of(const nlohmann::json& c) {
    QuantizationConfig q;
    q.method = c["quant_method"] == "gptq" ? QuantizationMethod::kGptq : QuantizationMethod::kAwq;
    q.bits = 4;
    q.group_size = c["group_size"].get<std::int64_t>();
    q.symmetric = c["sym"].get<bool>();
    q.desc_act = c["desc_act"].get<bool>();
    q.zeros_stored_minus_one = true;
    return q;
  }

  static Int4CheckpointTensors tensors_of(const std::string& name) {
    return {tensor(name + ".qweight"), tensor(name + ".qzeros"), tensor(name + ".scales"),
            tensor(name + ".g_idx")};
  }

  static StatusOr<QuantizedMatrix> repack(const nlohmann::json& c, Int4CheckpointTensors t) {
    const std::string name = c["name"];
    const auto rows = c["rows"].get<std::int64_t>();
    const auto cols = c["cols"].get<std::int64_t>();
    return c["quant_method"] == "gptq" ? repack_gptq(name, t, config_of(c), rows, cols)
                                       : repack_awq(name, t, config_of(c), rows, cols);
  }

  // Owns the mapping that tensors_ points into; freed at exit, after the last test.
  static inline std::unique_ptr<SafetensorsFile> file_;
  static inline auto* tensors_ = new std::map<std::string, ModelTensor>();
  static inline auto* cases_ = new nlohmann::json();
};

TEST_F(Int4Golden, EveryCaseDequantizesExactlyLikeTheReference) {
  ASSERT_EQ(cases_->size(), 9u);
  for (const nlohmann::json& c : *cases_) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    StatusOr<QuantizedMatrix> m = repack(c, tensors_of(name));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const std::int64_t rows = m->rows;
    const std::int64_t cols = m->cols;
    EXPECT_EQ(m->dtype, DType::kQ4_Z);
    EXPECT_EQ(m->input_permutation.empty(), !c["desc_act"].get<bool>());
    const ModelTensor* expected = tensor(name + ".expected");
    ASSERT_NE(expected, nullptr);
    std::vector<float> want(static_cast<std::size_t>(rows * cols));
    ASSERT_TRUE(dequantize(DType::kF32, expected->data, want).ok());

    const cpu::TensorView view = cpu::dense_view(m->bytes.data(), m->dtype, rows, cols);
    std::vector<float> reference(static_cast<std::size_t>(cols));
    std::vector<float> decoded(static_cast<std::size_t>(cols));
    int mismatches = 0;
    for (std::int64_t n = 0; n < rows; ++n) {
      ASSERT_TRUE(dequantize(DType::kQ4_Z, std::span(view.row(n), m->row_bytes()), reference).ok());
      cpu::decode_row(view, n, 0, cols, decoded.data());
      for (std::int64_t j = 0; j < cols; ++j) {
        // Stored column j is input channel perm[j].
        const std::int64_t k = m->input_permutation.empty() ? j : m->input_permutation[j];
        const float w = want[static_cast<std::size_t>(n * cols + k)];
        if ((reference[j] != w || decoded[j] != w) && ++mismatches <= 5) {
          ADD_FAILURE() << "W[" << n << ", " << k << "]: reference " << reference[j] << ", decoded "
                        << decoded[j] << ", golden " << w;
        }
      }
    }
  }
}

TEST_F(Int4Golden, ActOrderStoresEachBlockInOneGroup) {
  const nlohmann::json& c = (*cases_)[4];
  ASSERT_EQ(c["name"], "gptq_asym_g32_act_order");
  StatusOr<QuantizedMatrix> m = repack(c, tensors_of(c["name"]));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<std::int32_t> g_idx(m->cols);
  const ModelTensor* g = tensor(std::string(c["name"]) + ".g_idx");
  std::memcpy(g_idx.data(), g->data.data(), g->data.size());
  for (std::int64_t j = 0; j < m->cols; ++j) {
    EXPECT_EQ(g_idx[m->input_permutation[j]], g_idx[m->input_permutation[j / 32 * 32]]) << j;
  }
}

TEST_F(Int4Golden, BadTensorsAreErrorsNamingThem) {
  const nlohmann::json& c = (*cases_)[0];
  const std::string name = c["name"];
  Int4CheckpointTensors t = tensors_of(name);
  t.qzeros = nullptr;
  StatusOr<QuantizedMatrix> missing = repack(c, t);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(name + ".qzeros is missing"), std::string::npos)
      << missing.status().message();

  t = tensors_of(name);
  t.scales = tensor(name + ".expected");  // F32 [N, K]: wrong shape.
  StatusOr<QuantizedMatrix> shape = repack(c, t);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.status().message().find(".scales has shape"), std::string::npos);

  t = tensors_of(name);
  t.qweight = tensor(name + ".scales");  // F16: wrong type.
  StatusOr<QuantizedMatrix> type = repack(c, t);
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find(".qweight has type F16"), std::string::npos);

  // A g_idx naming a group that does not exist.
  std::vector<std::int32_t> bad(static_cast<std::size_t>(c["cols"].get<int>()), 0);
  bad[5] = 99;
  const ModelTensor bad_g_idx{
      "g_idx",
      DType::kI32,
      {bad.size()},
      std::span(reinterpret_cast<const std::uint8_t*>(bad.data()), bad.size() * 4)};
  t = tensors_of(name);
  t.g_idx = &bad_g_idx;
  StatusOr<QuantizedMatrix> range = repack(c, t);
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("g_idx[5] = 99"), std::string::npos);
}

TEST_F(Int4Golden, GroupsThatSplitA32BlockAreRefused) {
  // Act-order g_idx whose groups hold 16 channels each cannot be stored as whole 32-blocks.
  const nlohmann::json& c = (*cases_)[0];  // gptq_sym_g32: K = 128, 4 groups of 32.
  std::vector<std::int32_t> g_idx(128);
  for (int k = 0; k < 128; ++k) g_idx[k] = (k / 16) % 4;  // 32 per group, but interleaved by 16.
  g_idx[0] = 1;  // Group 1 now has 33 channels, group 0 only 31.
  const ModelTensor t_g_idx{"g_idx",
                            DType::kI32,
                            {128},
                            std::span(reinterpret_cast<const std::uint8_t*>(g_idx.data()), 512)};
  Int4CheckpointTensors t = tensors_of(c["name"]);
  t.g_idx = &t_g_idx;
  StatusOr<QuantizedMatrix> m = repack(c, t);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("32-channel blocks"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace pagoda::quant
