// libFuzzer target for a Hugging Face checkpoint's files, which `pagoda serve PATH` and
// `--tokenizer PATH` read from wherever they are pointed: the first byte picks the file, the
// rest is its content. Each must load or fail with a Status, never crash or hang, and what
// loads must hold together:
//   0  model.safetensors: every tensor's bytes lie inside the input, exactly its shape times its
//      dtype's size, and no two tensors overlap;
//   1  config.json: the model config, its quantization config and, read as
//      generation_config.json, its generation defaults;
//   2  tokenizer.json: a tokenizer whose ids for any text (its own file's included) are in its
//      vocabulary and decode without error.
// Built by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>
#include <vector>

#include "model/dtype.h"
#include "model/hf_config.h"
#include "model/quantization_config.h"
#include "model/safetensors_file.h"
#include "pagoda/tokenizer.h"

namespace pagoda::fuzz {
namespace {

void safetensors(std::span<const std::uint8_t> bytes) {
  auto file = SafetensorsFile::parse("fuzz.safetensors", bytes, nullptr);
  if (!file.ok()) return;
  const std::uint8_t* previous_end = nullptr;
  for (const SafetensorsTensor& t : (*file)->tensors()) {  // in data order
    if (t.data.data() < bytes.data() || t.data.data() + t.data.size() > bytes.data() + bytes.size())
      std::abort();
    std::uint64_t elements = 1;
    for (const std::uint64_t d : t.shape) elements *= d;
    if (dtype_num_bytes(t.dtype, elements) != t.data.size()) std::abort();
    if (t.data.empty()) continue;
    if (previous_end != nullptr && t.data.data() < previous_end) std::abort();
    previous_end = t.data.data() + t.data.size();
  }
}

void config(std::string_view text) {
  auto model = model_config_from_hf_json(text, "config.json");
  (void)quantization_config_from_hf_json(text, "config.json");
  if (!model.ok()) return;
  (void)generation_defaults_from_hf_json(text, "generation_config.json", *model);
}

void tokenizer(std::string_view text) {
  auto loaded = parse_tokenizer_json(text, "tokenizer.json");
  if (!loaded.ok()) return;
  const Tokenizer& t = **loaded;
  for (const std::string_view sample :
       {std::string_view("Hello, world! 123 \xc3\xa9\xe2\x82\xac\n"), text.substr(0, 256)}) {
    const std::vector<std::int32_t> ids = t.encode(sample);
    for (const std::int32_t id : ids) {
      if (id < 0 || id >= t.vocab_size()) std::abort();
    }
    (void)t.decode(ids);
  }
}

}  // namespace
}  // namespace pagoda::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda;
  if (size == 0) return 0;
  const std::span<const std::uint8_t> content(data + 1, size - 1);
  const std::string_view text(reinterpret_cast<const char*>(content.data()), content.size());
  switch (data[0] % 3) {
    case 0: fuzz::safetensors(content); break;
    case 1: fuzz::config(text); break;
    default: fuzz::tokenizer(text);
  }
  return 0;
}
