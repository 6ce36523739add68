// libFuzzer target for the default model's tokenizer on a client's text: encoding any bytes
// must never crash or take more than linear time, and streamed decoding must equal decode.
// Decoding need not give valid UTF-8 back whole: SmolLM2's vocabulary lacks some byte tokens
// (0x04, 0x06, ...), which HF's BPE then drops, as this tokenizer does. But text that came out of
// decode must: encoding and decoding it again changes nothing. Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_models.h"

namespace {

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    char32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda;
  const Tokenizer& tokenizer = *fuzz::default_tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<std::int32_t> ids = tokenizer.encode(text, {.add_special_tokens = false});
  if (ids.size() > size) std::abort();  // at most a token a byte
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) std::abort();
  }
  const std::string decoded = tokenizer.decode(ids);
  auto stream = tokenizer.start_decode();
  std::string streamed;
  for (const std::int32_t id : ids) streamed += stream->push(id);
  streamed += stream->finish();
  if (streamed != decoded) std::abort();
  if (valid_utf8(text)) {
    if (tokenizer.decode(tokenizer.encode(decoded, {.add_special_tokens = false})) != decoded) {
      std::abort();
    }
  }
  return 0;
}
