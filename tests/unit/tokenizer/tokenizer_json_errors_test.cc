// Broken or unsupported tokenizer.json files give a Status that names the file and the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "pagoda/tokenizer.h"

namespace pagoda {
namespace {

class TokenizerJsonErrorsTest : public ::testing::Test {
 protected:
  StatusOr<std::unique_ptr<Tokenizer>> load(const std::string& content) {
    path_ = (std::filesystem::temp_directory_path() /
             ("pagoda_tok_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
                .string();
    std::ofstream(path_) << content;
    return load_tokenizer_json(path_, "");
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void expect_error(const StatusOr<std::unique_ptr<Tokenizer>>& result, StatusCode code,
                    const std::string& words) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().code(), code) << result.status().to_string();
    EXPECT_NE(result.status().message().find(path_), std::string::npos)
        << result.status().to_string();
    EXPECT_NE(result.status().message().find(words), std::string::npos)
        << result.status().to_string();
  }

  std::string path_;
};

constexpr const char* kByteLevelParts =
    R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
       "decoder": {"type": "ByteLevel"}, "post_processor": null, "normalizer": null)";

TEST_F(TokenizerJsonErrorsTest, MissingFileIsNotFound) {
  const auto result = load_tokenizer_json("/nonexistent/tokenizer.json", "");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
}

TEST_F(TokenizerJsonErrorsTest, MalformedJson) {
  expect_error(load(R"({"model": {"type": "BPE", )"), StatusCode::kInvalidArgument,
               "not valid JSON");
}

TEST_F(TokenizerJsonErrorsTest, MissingModel) {
  expect_error(load(R"({"added_tokens": []})"), StatusCode::kInvalidArgument, "\"model\"");
}

TEST_F(TokenizerJsonErrorsTest, UnsupportedModelType) {
  expect_error(load(std::string("{") + kByteLevelParts +
                    R"(, "model": {"type": "WordPiece", "vocab": {"a": 0}}})"),
               StatusCode::kUnimplemented, "WordPiece");
  expect_error(load(std::string("{") + kByteLevelParts +
                    R"(, "model": {"type": "Unigram", "vocab": [["a", 0.0]]}})"),
               StatusCode::kUnimplemented, "Unigram");
}

TEST_F(TokenizerJsonErrorsTest, MergeWithUnknownToken) {
  expect_error(load(std::string("{") + kByteLevelParts +
                    R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2},
                       "merges": ["a b", "a zz"]}})"),
               StatusCode::kInvalidArgument, "\"zz\"");
}

TEST_F(TokenizerJsonErrorsTest, WrongShapeIsAnErrorNotACrash) {
  expect_error(load(std::string("{") + kByteLevelParts +
                    R"(, "model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})"),
               StatusCode::kInvalidArgument, "unexpected structure");
}

TEST_F(TokenizerJsonErrorsTest, UnsupportedPreTokenizer) {
  expect_error(load(R"({"pre_tokenizer": {"type": "BertPreTokenizer"}, "decoder": null,
                        "model": {"type": "BPE", "vocab": {}, "merges": []}})"),
               StatusCode::kUnimplemented, "BertPreTokenizer");
}

TEST_F(TokenizerJsonErrorsTest, UnsupportedNormalizer) {
  expect_error(load(std::string("{") +
                    R"("normalizer": {"type": "Precompiled", "precompiled_charsmap": ""},
                        "pre_tokenizer": null, "decoder": null,
                        "model": {"type": "BPE", "vocab": {}, "merges": []}})"),
               StatusCode::kUnimplemented, "Precompiled");
}

TEST_F(TokenizerJsonErrorsTest, BadRegex) {
  expect_error(load(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
                        "behavior": "Isolated"}, "decoder": null,
                        "model": {"type": "BPE", "vocab": {}, "merges": []}})"),
               StatusCode::kInvalidArgument, "(unclosed");
}

TEST_F(TokenizerJsonErrorsTest, MinimalByteLevelTokenizerWorks) {
  auto result = load(std::string("{") + kByteLevelParts +
                     R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3},
                        "merges": ["a b"]}})");
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  const auto& tok = **result;
  EXPECT_EQ(tok.encode("ab ab"), (std::vector<std::int32_t>{2, 3, 2}));
  EXPECT_EQ(tok.decode(std::vector<std::int32_t>{2, 3, 2, 99}), "ab ab");
  // Without an unk token, tokenizers 0.23 drops unknown characters before merging: "axb" -> [2].
  EXPECT_EQ(tok.encode("axb"), (std::vector<std::int32_t>{2}));
}

// parse_tokenizer_json is load_tokenizer_json on text already read: the same tokenizer from the
// same bytes (its tokenizer_config.json applied), and errors name the sources it is given.
TEST(TokenizerJsonText, ParsesAsTheFileLoadsAndNamesItsSources) {
  const std::string dir = std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/smollm2/";
  const auto text = [](const std::string& path) {
    std::ostringstream out;
    out << std::ifstream(path).rdbuf();
    return out.str();
  };
  auto loaded = load_tokenizer_json(dir + "tokenizer.json", dir + "tokenizer_config.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto parsed = parse_tokenizer_json(text(dir + "tokenizer.json"), "a",
                                     text(dir + "tokenizer_config.json"), "b");
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  const std::string sample = "<|im_start|>user\nHello, world! caf\xc3\xa9 123<|im_end|>";
  EXPECT_EQ((*parsed)->encode(sample), (*loaded)->encode(sample));
  EXPECT_EQ((*parsed)->vocab_size(), (*loaded)->vocab_size());
  // The config's bos_token and eos_token.
  EXPECT_EQ((*parsed)->bos_id(), (*parsed)->piece_to_token("<|im_start|>"));
  EXPECT_EQ((*parsed)->eos_id(), (*parsed)->piece_to_token("<|im_end|>"));
  ASSERT_TRUE((*parsed)->eos_id().has_value());

  auto bad_json = parse_tokenizer_json("{", "first.json");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().message().rfind("first.json: not valid JSON", 0), 0u)
      << bad_json.status().to_string();
  auto bad_config = parse_tokenizer_json(text(dir + "tokenizer.json"), "first.json", "[", "second");
  ASSERT_FALSE(bad_config.ok());
  EXPECT_EQ(bad_config.status().message().rfind("second: not valid JSON", 0), 0u)
      << bad_config.status().to_string();
}

}  // namespace
}  // namespace pagoda
