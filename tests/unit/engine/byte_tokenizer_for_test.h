// A byte-level BPE tokenizer for output-processing tests: id b is byte b (so a test chooses
// exactly where tokens split a character), plus three added tokens.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "pagoda/tokenizer.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {

constexpr std::int32_t kEos = 256;
constexpr std::int32_t kImStart = 257;
constexpr std::int32_t kHelloWorld = 258;  // Non-special added token "Hello world."

// GPT-2's byte-to-character table: printable bytes stand for themselves, the rest are moved to
// U+0100 onwards, so every byte has a visible vocabulary spelling.
inline std::string byte_piece(int byte) {
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  int shifted = 0;
  for (int b = 0; b < byte; ++b) shifted += printable(b) ? 0 : 1;
  std::string out;
  append_code_point(static_cast<char32_t>(printable(byte) ? byte : 256 + shifted), out);
  return out;
}

// A byte-level BPE with no merges: id b is byte b, plus three added tokens.
inline std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_piece(b)] = b;
  auto added = [](int id, const char* content, bool special) {
    return nlohmann::json{{"id", id},          {"content", content}, {"single_word", false},
                          {"lstrip", false},   {"rstrip", false},    {"normalized", false},
                          {"special", special}};
  };
  const nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens",
       {added(kEos, "<|eos|>", true), added(kImStart, "<|im_start|>", true),
        added(kHelloWorld, "Hello world.", false)}},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
  };
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("pagoda_output_tok_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::ofstream(path) << json.dump();
  auto tokenizer = load_tokenizer_json(path, "");
  std::filesystem::remove(path);
  PAGODA_CHECK(tokenizer.ok()) << tokenizer.status().to_string();
  return std::move(tokenizer).value();
}

inline std::vector<std::int32_t> bytes_of(std::string_view text) {
  std::vector<std::int32_t> ids;
  for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

}  // namespace pagoda::engine
