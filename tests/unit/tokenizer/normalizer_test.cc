// Normalizer steps on hand-picked strings (expected values printed by tokenizers 0.23.3's
// normalize_str), and the errors a broken "normalizer" section gives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_json_components.h"

namespace pagoda {
namespace {

const std::string kSource = "test/tokenizer.json";

std::string normalize(const std::string& normalizer_json, const std::string& text) {
  auto normalizer = parse_normalizer(nlohmann::json::parse(normalizer_json), kSource);
  EXPECT_TRUE(normalizer.ok()) << normalizer.status().to_string();
  return normalizer.ok() ? normalizer->apply(text) : std::string("(error)");
}

TEST(NormalizerTest, UnicodeFormsKeepEmbeddedNul) {
  EXPECT_EQ(normalize(R"({"type": "NFKC"})", std::string("x\0y\u2460", 6)),
            std::string("x\0y1", 4));
}

TEST(NormalizerTest, UnicodeFormsComposeAndDecomposeHangul) {
  EXPECT_EQ(normalize(R"({"type": "NFC"})", "\u1100\u1161\u11a8 e\u0301"), "\uac01 \u00e9");
  EXPECT_EQ(normalize(R"({"type": "NFD"})", "\uac01"), "\u1100\u1161\u11a8");
}

TEST(NormalizerTest, InvalidUtf8IsRepairedNotRejected) {
  EXPECT_EQ(normalize(R"({"type": "NFC"})",
                      "a\xff"
                      "b\xe2\x82"),
            "a\uFFFDb\uFFFD");
  EXPECT_EQ(normalize(R"({"type": "Strip"})", " \xc3 "), "\uFFFD");
}

TEST(NormalizerTest, LowercaseIsPerCharacterWithoutFinalSigma) {
  EXPECT_EQ(normalize(R"({"type": "Lowercase"})", "\u0130 \u03a3\u0391\u03a3"),
            "i\u0307 \u03c3\u03b1\u03c3");
}

TEST(NormalizerTest, StripUsesTheWhiteSpaceProperty) {
  EXPECT_EQ(
      normalize(R"({"type": "Strip", "strip_left": true, "strip_right": true})", "\u3000x\u0085"),
      "x");
  // U+001C is a separator to Python's isspace, not to Rust's is_whitespace.
  EXPECT_EQ(normalize(R"({"type": "Strip"})", "\x1c x \x1c"), "\x1c x \x1c");
  EXPECT_EQ(normalize(R"({"type": "Strip", "strip_left": true, "strip_right": false})", " x "),
            "x ");
}

TEST(NormalizerTest, StripAccentsRemovesOnlyMarks) {
  EXPECT_EQ(normalize(R"({"type": "StripAccents"})", "\u00e9e\u0301"), "\u00e9e");
  EXPECT_EQ(normalize(R"({"type": "Sequence", "normalizers": [{"type": "NFD"},
                  {"type": "StripAccents"}, {"type": "Lowercase"}]})",
                      "\u00c9COLE \u00c5ngstr\u00f6m"),
            "ecole angstrom");
}

TEST(NormalizerTest, RegexReplacementIsLiteral) {
  EXPECT_EQ(normalize(R"j({"type": "Replace", "pattern": {"Regex": "(\\d)"}, "content": "<$1>"})j",
                      "a1b22"),
            "a<$1>b<$1><$1>");
}

Status parse_error(const std::string& normalizer_json) {
  return parse_normalizer(nlohmann::json::parse(normalizer_json), kSource).status();
}

TEST(NormalizerTest, UnsupportedTypesAreUnimplemented) {
  for (const char* type : {"BertNormalizer", "Precompiled", "Nmt", "ByteLevel"}) {
    const Status status = parse_error(std::string(R"({"type": ")") + type + "\"}");
    EXPECT_EQ(status.code(), StatusCode::kUnimplemented) << status.to_string();
    EXPECT_NE(status.message().find(kSource), std::string::npos) << status.to_string();
    EXPECT_NE(status.message().find(type), std::string::npos) << status.to_string();
  }
}

TEST(NormalizerTest, BadReplaceRegexNamesThePattern) {
  const Status status =
      parse_error(R"({"type": "Replace", "pattern": {"Regex": "(open"}, "content": ""})");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("(open"), std::string::npos) << status.to_string();
}

TEST(NormalizerTest, DeepNestingIsAnErrorNotAStackOverflow) {
  constexpr int kDepth = 10000;
  std::string nested;
  for (int i = 0; i < kDepth; ++i) nested += R"({"type":"Sequence","normalizers":[)";
  nested += R"({"type": "NFC"})";
  for (int i = 0; i < kDepth; ++i) nested += "]}";
  const Status status = parse_error(nested);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find("nested"), std::string::npos) << status.to_string();
}

}  // namespace
}  // namespace pagoda
