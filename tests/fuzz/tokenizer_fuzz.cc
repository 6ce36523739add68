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
#include "tokenizer/utf8.h"

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
  if (is_valid_utf8(text)) {
    if (tokenizer.decode(tokenizer.encode(decoded, {.add_special_tokens = false})) != decoded) {
      std::abort();
    }
  }
  return 0;
}
