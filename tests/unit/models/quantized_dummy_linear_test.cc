// --load-format dummy --quantization: quantized_dummy_linear draws each row where the quantizer's
// threads read it; the result must be the whole bf16 draw (random_fill_value, rounded to bf16)
// cut into its parts and quantized by the checkpoint path, byte for byte, at part sizes that do
// not fill the quantizer's 16-row ranges or the machine's threads evenly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/random_fill_draw.h"
#include "models/llama_weights.h"
#include "quant/fp8_weights.h"
#include "quant/int4_rtn.h"

namespace pagoda::models {
namespace {

// Round to nearest even, written apart from the loader's.
std::uint16_t bf16_bits(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

TEST(QuantizedDummyLinear, IsTheBf16DrawQuantizedPartByPart) {
  struct Case {
    std::vector<std::int64_t> rows;
    std::int64_t cols;
  };
  const std::vector<Case> cases = {{{1}, 32}, {{5, 3, 1}, 96}, {{37, 37}, 160}, {{50, 17}, 288}};
  std::uint64_t seed = 9;
  for (const Case& c : cases) {
    for (const auto q : {quant::LoadTimeQuantization::kFp8, quant::LoadTimeQuantization::kInt4}) {
      SCOPED_TRACE(std::string(quant::load_time_quantization_name(q)) + ", cols " +
                   std::to_string(c.cols) + ", seed " + std::to_string(seed));
      std::int64_t total = 0;
      for (const std::int64_t r : c.rows) total += r;
      const float bound = 1.0f / std::sqrt(static_cast<float>(c.cols));
      std::vector<std::uint16_t> draw(static_cast<std::size_t>(total * c.cols));
      for (std::size_t i = 0; i < draw.size(); ++i) {
        draw[i] = bf16_bits(random_fill_value(seed, i, -bound, 2.0f * bound));
      }
      StatusOr<QuantizedDummyLinear> got = quantized_dummy_linear(seed, c.rows, c.cols, q);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(got->parts.size(), c.rows.size());
      std::int64_t first_row = 0;
      for (std::size_t p = 0; p < c.rows.size(); ++p) {
        const std::int64_t r = c.rows[p];
        const ModelTensor part{
            "part",
            DType::kBF16,
            {static_cast<std::uint64_t>(r), static_cast<std::uint64_t>(c.cols)},
            std::span(reinterpret_cast<const std::uint8_t*>(draw.data() + first_row * c.cols),
                      static_cast<std::size_t>(r * c.cols) * sizeof(std::uint16_t))};
        first_row += r;
        StatusOr<quant::QuantizedMatrix> want =
            q == quant::LoadTimeQuantization::kFp8
                ? quant::quantize_fp8_per_channel("part", part, r, c.cols)
                : quant::quantize_int4_rtn("part", part, r, c.cols);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        EXPECT_EQ(got->storage[p]->bytes, want->bytes) << "part " << p;
        EXPECT_EQ(got->storage[p]->group_size, want->group_size) << "part " << p;
        EXPECT_EQ(got->parts[p].data, got->storage[p]->bytes.data());
        EXPECT_EQ(got->parts[p].num_rows, r);
      }
      ++seed;
    }
  }
}

}  // namespace
}  // namespace pagoda::models
