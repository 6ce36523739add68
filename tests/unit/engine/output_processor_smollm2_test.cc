// The real SmolLM2 tokenizer through OutputProcessor, one token per step: streamed text equals
// decode() of all ids (special tokens kept or skipped), and stop strings cut real text.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/output_processor.h"
#include "model/gguf_file.h"
#include "tokenizer/gguf_tokenizer_loader.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {
namespace {

constexpr EncodeOptions kNoSpecialTokens{.add_special_tokens = false, .parse_special = true};

// The real SmolLM2 tokenizer: streamed text, one token per step, equals decode() of all ids.
class SmolLm2OutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path =
        std::string(PAGODA_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::exists(path)) {
      GTEST_SKIP() << "models/SmolLM2-135M-Instruct.Q4_1.gguf is missing; run scripts/setup.sh";
    }
    auto gguf = GgufFile::open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
    gguf_ = std::move(gguf).value();
    auto tokenizer = load_tokenizer_from_gguf(*gguf_);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    tokenizer_ = std::move(tokenizer).value();
  }

  std::string stream(const std::vector<std::int32_t>& ids, OutputOptions options) {
    OutputProcessor processor(*tokenizer_);
    options.stream = true;
    EXPECT_TRUE(processor.add_request(/*slot=*/0, "r", options, 1, 0.0).ok());
    std::string text;
    for (std::size_t i = 0; i < ids.size() && processor.has_request(0); ++i) {
      RequestUpdate u;
      u.request_id = "r";
      u.slot = 0;
      u.new_token_ids = {ids[i]};
      u.num_output_tokens = static_cast<std::int64_t>(i + 1);
      if (i + 1 == ids.size()) u.status = RequestStatus::kFinishedLength;
      for (const RequestOutput& o : processor.process(std::vector<RequestUpdate>{u}, 1.0).outputs) {
        EXPECT_TRUE(is_valid_utf8(o.text)) << o.text;
        text += o.text;
      }
    }
    return text;
  }

  std::unique_ptr<GgufFile> gguf_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SmolLm2OutputTest, StreamedTextEqualsDecodeOfAllIds) {
  const std::string text =
      "<|im_start|>assistant\nHello, 世界! Ça va? 🎉🤖 naïve café — 12345 "
      "ok.\n<|im_end|> "
      "done";
  const std::vector<std::int32_t> ids = tokenizer_->encode(text, kNoSpecialTokens);
  for (const bool skip : {false, true}) {
    OutputOptions options;
    options.skip_special_tokens = skip;
    EXPECT_EQ(stream(ids, options), tokenizer_->decode(ids, {.skip_special_tokens = skip}))
        << "skip_special_tokens=" << skip;
  }
  OutputOptions keep;
  keep.skip_special_tokens = false;
  EXPECT_EQ(stream(ids, keep), text);
}

TEST_F(SmolLm2OutputTest, StopStringOnRealTokens) {
  const std::string text = "The answer is 42. Next question: why?";
  const std::vector<std::int32_t> ids = tokenizer_->encode(text, kNoSpecialTokens);
  OutputOptions options;
  options.stop = {"Next q", "never"};
  EXPECT_EQ(stream(ids, options), "The answer is 42. ");
}

}  // namespace
}  // namespace pagoda::engine
