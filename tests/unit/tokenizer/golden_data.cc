#include "golden_data.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pagoda::testing {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

const std::string kDir = std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/";

}  // namespace

std::vector<std::string> load_corpus() {
  std::vector<std::string> corpus = split_lines(read_all(kDir + "corpus.txt"));
  for (const std::string& line : split_lines(read_all(kDir + "corpus_multiline.jsonl"))) {
    corpus.push_back(nlohmann::json::parse(line).get<std::string>());
  }
  return corpus;
}

GoldenSet load_golden(const std::string& name) {
  const std::vector<std::string> corpus = load_corpus();
  GoldenSet set;
  const std::vector<std::string> lines =
      split_lines(read_all(kDir + "expected/" + name + ".jsonl"));
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    if (j.contains("random")) {
      set.random.push_back({j["random"].get<std::vector<std::int32_t>>(),
                            j["decoded"].get<std::string>(), j["decoded_skip"].get<std::string>()});
      continue;
    }
    GoldenSample s;
    s.text = corpus.at(j["i"].get<std::size_t>());
    s.ids = j["ids"].get<std::vector<std::int32_t>>();
    s.ids_plain = j.contains("ids_plain") ? j["ids_plain"].get<std::vector<std::int32_t>>() : s.ids;
    if (j.contains("ids_added")) s.ids_added = j["ids_added"].get<std::vector<std::int32_t>>();
    s.decoded = j["decoded"].get<std::string>();
    s.decoded_skip = j.contains("decoded_skip") ? j["decoded_skip"].get<std::string>() : s.decoded;
    set.samples.push_back(std::move(s));
  }
  EXPECT_EQ(set.samples.size(), corpus.size()) << name
                                               << " does not match the corpus; rerun "
                                                  "tests/golden/tokenizer/make_golden.py";
  return set;
}

}  // namespace pagoda::testing
