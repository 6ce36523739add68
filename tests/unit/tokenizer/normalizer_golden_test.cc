// The tokenizer.json normalizers against Hugging Face tokenizers, byte for byte: for each small
// tokenizer that tests/golden/tokenizer/make_normalizer_golden.py trained and gave a normalizer,
// the normalized text of every corpus sample and the ids of a subset (see the script for which).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "golden_data.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/tokenizer_json_components.h"

namespace pagoda {
namespace {

const std::string kDir = std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/normalizers/";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class NormalizerGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NormalizerGoldenTest, MatchesReference) {
  const std::string path = kDir + GetParam() + "/tokenizer.json";
  auto tokenizer = load_tokenizer_json(path, "");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  auto normalizer = parse_normalizer(nlohmann::json::parse(read_all(path)).at("normalizer"), path);
  ASSERT_TRUE(normalizer.ok()) << normalizer.status().to_string();

  const std::vector<std::string> corpus = testing::load_corpus();
  std::set<std::size_t> listed;
  std::size_t num_ids = 0;
  std::istringstream expected(read_all(kDir + "expected/" + GetParam() + ".jsonl"));
  std::string line;
  std::getline(expected, line);  // Tool versions.
  int failures = 0;
  while (std::getline(expected, line) && failures <= 10) {
    const nlohmann::json j = nlohmann::json::parse(line);
    std::string text;
    if (j.contains("i")) {
      const std::size_t index = j["i"].get<std::size_t>();
      ASSERT_LT(index, corpus.size()) << "rerun tests/golden/tokenizer/make_normalizer_golden.py";
      text = corpus[index];
      listed.insert(index);
    } else {
      text = j.at("text").get<std::string>();
    }
    const std::string want = j.contains("normalized") ? j["normalized"].get<std::string>() : text;
    const std::string got = normalizer->apply(text);
    EXPECT_EQ(got, want) << "normalizing " << ::testing::PrintToString(text);
    failures += got != want;
    if (j.contains("ids")) {
      ++num_ids;
      const auto ids = (*tokenizer)->encode(text, {.add_special_tokens = false});
      EXPECT_EQ(ids, j["ids"].get<std::vector<std::int32_t>>())
          << "encoding " << ::testing::PrintToString(text);
      failures += ids != j["ids"].get<std::vector<std::int32_t>>();
    }
  }
  ASSERT_LE(failures, 10) << "stopping after 10 mismatching samples";
  EXPECT_GT(num_ids, 20u) << "the golden file holds too few ids to test the tokenizer";
  // Samples the file leaves out are the ones the reference left unchanged.
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    if (listed.count(i) == 0) {
      EXPECT_EQ(normalizer->apply(corpus[i]), corpus[i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Normalizers, NormalizerGoldenTest,
                         ::testing::Values("nfc", "nfd", "nfkc", "nfkd", "lowercase",
                                           "nfkc_lowercase", "strip", "strip_right",
                                           "strip_accents", "nfd_strip_accents", "replace",
                                           "qwen2"));

}  // namespace
}  // namespace pagoda
