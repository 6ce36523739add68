// Gemma 3's GGUF vocabulary (262,144 SentencePiece pieces, 6,384 added tokens) on input built to
// be slow: with no pre-tokenizer split, each run of text between added tokens is one BPE word, and
// 6,000 added tokens share the prefix "<unused". Encoding must stay near-linear; the golden test
// (golden_test.cc, Gemma3Gguf) checks the ids themselves against Hugging Face tokenizers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "model/gguf_file.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/gguf_tokenizer_loader.h"

namespace pagoda {
namespace {

const std::string kGemmaPath =
    std::string(PAGODA_SOURCE_DIR) + "/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf";

class GemmaTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kGemmaPath)) return;
    auto gguf = GgufFile::open(kGemmaPath);
    ASSERT_TRUE(gguf.ok()) << gguf.status().to_string();
    auto loaded = load_tokenizer_from_gguf(**gguf);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    tokenizer_ = loaded->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ != nullptr) return;
    // CI runs scripts/setup.sh first, so there a missing file is a broken set-up, not a skip.
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string_view(ci) == "true") {
      FAIL() << kGemmaPath << " is missing although CI=true; scripts/setup.sh fetches it";
    }
    GTEST_SKIP() << kGemmaPath << " is missing; run scripts/setup.sh";
  }

  static Tokenizer* tokenizer_;
};

Tokenizer* GemmaTokenizerTest::tokenizer_ = nullptr;

std::string repeat(std::string_view unit, std::size_t bytes) {
  std::string out;
  while (out.size() < bytes) out.append(unit);
  return out;
}

// Seconds to encode `text` once.
double encode_seconds(const Tokenizer& tokenizer, const std::string& text) {
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer.encode(text, {.add_special_tokens = false});
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(ids.empty());
  return took.count();
}

TEST_F(GemmaTokenizerTest, NamesItsSpecialTokens) {
  // Ids from the GGUF's own token table (tokenizer.ggml.*_token_id and the pieces' positions).
  EXPECT_EQ(tokenizer_->bos_id(), 2);
  EXPECT_EQ(tokenizer_->eos_id(), 1);
  EXPECT_EQ(tokenizer_->pad_id(), 0);
  EXPECT_EQ(tokenizer_->vocab_size(), 262144);
  EXPECT_EQ(tokenizer_->piece_to_token("<start_of_turn>"), 105);
  EXPECT_EQ(tokenizer_->piece_to_token("<end_of_turn>"), 106);
  EXPECT_TRUE(tokenizer_->is_special(105));
  EXPECT_FALSE(tokenizer_->is_special(107));  // "\n": user-defined, not special.
  EXPECT_EQ(tokenizer_->encode("<start_of_turn>user\n", {.add_special_tokens = true}).front(), 2);
}

TEST_F(GemmaTokenizerTest, HostileInputEncodesInNearLinearTime) {
  // Each input is 256 KiB: one word without spaces, runs of added-token prefixes, and runs the
  // added tokens match piece by piece. Quadratic work on any of them takes minutes here.
  constexpr std::size_t kBytes = 256 * 1024;
  const std::string inputs[] = {
      repeat("a", kBytes),
      repeat("<", kBytes),
      repeat("<unused12", kBytes),
      repeat("<unused1><unused2>", kBytes),
      repeat("\n", kBytes),
      repeat(" ", kBytes),
      repeat("\t \n", kBytes),
      repeat("\xe4\xb8\x80\xe4\xba\x8c", kBytes),  // CJK without spaces.
      repeat("\xf0\x9f\x98\x80", kBytes),          // An emoji: byte fallback or whole pieces.
  };
  for (const std::string& text : inputs) {
    const double seconds = encode_seconds(*tokenizer_, text);
    EXPECT_LT(seconds, 5.0) << "encoding 256 KiB of \"" << text.substr(0, 12) << "...\" took "
                            << seconds << " s";
    EXPECT_EQ(tokenizer_->decode(tokenizer_->encode(text, {.add_special_tokens = false})), text);
  }
}

TEST_F(GemmaTokenizerTest, LongWordCostGrowsNearLinearly) {
  // Four times the text should cost about four times as much, not sixteen.
  const std::string unit = "Supercalifragilisticexpialidocious-antidisestablishmentarianism_";
  const std::string small = repeat(unit, 32 * 1024);
  const std::string large = repeat(unit, 128 * 1024);
  double best_small = 1e9;
  double best_large = 1e9;
  for (int round = 0; round < 3; ++round) {
    best_small = std::min(best_small, encode_seconds(*tokenizer_, small));
    best_large = std::min(best_large, encode_seconds(*tokenizer_, large));
  }
  EXPECT_LT(best_large, 10.0 * best_small + 0.05)
      << "32 KiB: " << best_small << " s, 128 KiB: " << best_large << " s";
}

}  // namespace
}  // namespace pagoda
