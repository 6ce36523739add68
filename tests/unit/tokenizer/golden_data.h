// Loads the committed tokenizer corpus and the expected ids/strings that
// tests/golden/tokenizer/make_golden.py produced with Hugging Face tokenizers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pagoda::testing {

/// One corpus sample and what the reference made of it.
struct GoldenSample {
  std::string text;
  std::vector<std::int32_t> ids;        // add_special_tokens=False, specials parsed.
  std::vector<std::int32_t> ids_plain;  // encode_special_tokens=True (specials as text).
  std::optional<std::vector<std::int32_t>> ids_added;  // add_special_tokens=True.
  std::string decoded;
  std::string decoded_skip;
};

/// A random id sequence and its reference decodes.
struct GoldenRandom {
  std::vector<std::int32_t> ids;
  std::string decoded;
  std::string decoded_skip;
};

/// Everything expected/<name>.jsonl holds.
struct GoldenSet {
  std::vector<GoldenSample> samples;
  std::vector<GoldenRandom> random;
};

/// corpus.txt lines followed by corpus_multiline.jsonl samples.
std::vector<std::string> load_corpus();
/// Reads tests/data/tokenizer/expected/<name>.jsonl against the corpus.
GoldenSet load_golden(const std::string& name);

}  // namespace pagoda::testing
