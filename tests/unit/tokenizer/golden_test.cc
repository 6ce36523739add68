// Every tokenizer and load path against the ids and strings Hugging Face tokenizers produced for
// the committed corpus (tests/golden/tokenizer/make_golden.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "golden_data.h"
#include "model/gguf_file.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/gguf_tokenizer_loader.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda {
namespace {

struct Case {
  std::string name;      // Test name.
  std::string golden;    // expected/<golden>.jsonl
  std::string json_dir;  // tests/data/tokenizer/<json_dir>/ or empty for the GGUF path.
  std::string gguf;      // models/... when loading from GGUF.
  bool lossless;         // decode(encode(x)) == x.
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.name;
}

std::string escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

StatusOr<std::unique_ptr<Tokenizer>> load(const Case& c) {
  if (c.json_dir.empty()) {
    PAGODA_ASSIGN_OR_RETURN(auto gguf,
                            GgufFile::open(std::string(PAGODA_SOURCE_DIR) + "/models/" + c.gguf));
    return load_tokenizer_from_gguf(*gguf);
  }
  const std::string dir = std::string(PAGODA_TEST_DATA_DIR) + "/tokenizer/" + c.json_dir + "/";
  return load_tokenizer_json(dir + "tokenizer.json", dir + "tokenizer_config.json");
}

class GoldenTest : public ::testing::TestWithParam<Case> {};

void check_encode(const Tokenizer& tokenizer, const testing::GoldenSet& golden) {
  int failures = 0;
  for (const auto& s : golden.samples) {
    const auto ids = tokenizer.encode(s.text, {.add_special_tokens = false, .parse_special = true});
    const auto plain =
        tokenizer.encode(s.text, {.add_special_tokens = false, .parse_special = false});
    EXPECT_EQ(ids, s.ids) << "text: \"" << escape(s.text) << "\"";
    EXPECT_EQ(plain, s.ids_plain) << "parse_special=false, text: \"" << escape(s.text) << "\"";
    if (s.ids_added) {
      EXPECT_EQ(tokenizer.encode(s.text, {.add_special_tokens = true}), *s.ids_added)
          << "add_special_tokens, text: \"" << escape(s.text) << "\"";
    }
    failures += ids != s.ids || plain != s.ids_plain;
    if (failures > 10) {
      ADD_FAILURE() << "stopping after 10 mismatching samples";
      return;
    }
  }
}

void check_decode(const Tokenizer& tokenizer, const testing::GoldenSet& golden) {
  for (const auto& s : golden.samples) {
    EXPECT_EQ(tokenizer.decode(s.ids), s.decoded);
    EXPECT_EQ(tokenizer.decode(s.ids, {.skip_special_tokens = true}), s.decoded_skip);
  }
  for (const auto& r : golden.random) {
    EXPECT_EQ(tokenizer.decode(r.ids), r.decoded);
    EXPECT_EQ(tokenizer.decode(r.ids, {.skip_special_tokens = true}), r.decoded_skip);
  }
}

void check_round_trip(const Tokenizer& tokenizer, const testing::GoldenSet& golden) {
  for (const auto& s : golden.samples) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(s.text, {.add_special_tokens = false})), s.text);
  }
}

// The streamed text is valid UTF-8 at every step, a prefix of the full decode of the ids so far
// (checked for sequences up to kMaxPrefixChecked ids: the check is quadratic), and equal to the
// full decode after flush.
constexpr std::size_t kMaxPrefixChecked = 64;

void check_incremental(const Tokenizer& tokenizer, const std::vector<std::int32_t>& ids,
                       bool skip_special) {
  IncrementalDetokenizer detok(tokenizer, {.skip_special_tokens = skip_special});
  for (std::size_t n = 0; n < ids.size(); ++n) {
    const std::string piece = detok.add(ids[n]);
    ASSERT_TRUE(is_valid_utf8(piece));
    if (ids.size() > kMaxPrefixChecked) continue;
    const std::string full =
        tokenizer.decode(std::span(ids).first(n + 1), {.skip_special_tokens = skip_special});
    ASSERT_TRUE(full.starts_with(detok.text())) << "after " << n + 1 << " ids";
  }
  detok.flush();
  EXPECT_EQ(detok.text(), tokenizer.decode(ids, {.skip_special_tokens = skip_special}));
}

void check_incremental_all(const Tokenizer& tokenizer, const testing::GoldenSet& golden) {
  for (const auto& s : golden.samples) {
    check_incremental(tokenizer, s.ids, false);
  }
  for (const auto& r : golden.random) {
    check_incremental(tokenizer, r.ids, false);
    check_incremental(tokenizer, r.ids, true);
  }
}

// One test per tokenizer, so that ctest (a process per test) loads each vocabulary once.
TEST_P(GoldenTest, MatchesReference) {
  const Case& c = GetParam();
  if (!c.gguf.empty() &&
      !std::filesystem::exists(std::string(PAGODA_SOURCE_DIR) + "/models/" + c.gguf)) {
    // CI runs scripts/setup.sh first, so there a missing file is a broken set-up, not a skip.
    const char* ci = std::getenv("CI");
    if (ci != nullptr && std::string_view(ci) == "true") {
      FAIL() << "models/" << c.gguf << " is missing although CI=true; scripts/setup.sh fetches it";
    }
    GTEST_SKIP() << "models/" << c.gguf << " is missing; run scripts/setup.sh";
  }
  auto tokenizer = load(c);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const testing::GoldenSet golden = testing::load_golden(c.golden);
  {
    SCOPED_TRACE("encode");
    check_encode(**tokenizer, golden);
  }
  {
    SCOPED_TRACE("decode");
    check_decode(**tokenizer, golden);
  }
  if (c.lossless) {
    SCOPED_TRACE("round trip");
    check_round_trip(**tokenizer, golden);
  }
  {
    SCOPED_TRACE("incremental detokenizer");
    check_incremental_all(**tokenizer, golden);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, GoldenTest,
    ::testing::Values(
        Case{"SmolLM2Json", "smollm2", "smollm2", "", true},
        Case{"SmolLM2Gguf", "smollm2_digits", "", "SmolLM2-135M-Instruct.Q4_1.gguf", true},
        Case{"LlamaSpmJson", "llama_spm", "llama_spm", "", false},
        Case{"LlamaSpmGguf", "llama_spm", "", "vocab/ggml-vocab-llama-spm.gguf", false},
        Case{"LlamaBpeGguf", "llama_bpe", "", "vocab/ggml-vocab-llama-bpe.gguf", true},
        Case{"Qwen2Gguf", "qwen2", "", "vocab/ggml-vocab-qwen2.gguf", true},
        Case{"Gemma3Gguf", "gemma3", "", "gemma-3-270m/gemma-3-270m-q4_k_m.gguf", true}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pagoda
