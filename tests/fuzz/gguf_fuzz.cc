// libFuzzer target for the GGUF parser: any input must parse or fail with a Status, and every
// tensor span a successful parse returns must lie inside the input. Built with clang
// by scripts/fuzz.sh, or by hand from the repository root:
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
//     tests/fuzz/gguf_fuzz.cc src/model/gguf_file.cc src/model/gguf_value.cc src/model/dtype.cc \
//     src/common/mapped_file.cc src/common/status.cc -o /tmp/gguf_fuzz
//   mkdir -p /tmp/gguf_corpus && cp tests/data/model/value_types_v3.gguf /tmp/gguf_corpus/
//   /tmp/gguf_fuzz -max_total_time=60 /tmp/gguf_corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "model/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> bytes(data, size);
  auto file = pagoda::GgufFile::parse("fuzz.gguf", bytes, nullptr);
  if (!file.ok()) return 0;
  for (const pagoda::GgufTensorInfo& t : (*file)->tensors()) {
    if (t.data.data() < data || t.data.data() + t.data.size() > data + size) std::abort();
  }
  for (const pagoda::GgufKeyValue& kv : (*file)->metadata()) {
    if (auto s = kv.value.as_string()) {
      if (s->data() < reinterpret_cast<const char*>(data) ||
          s->data() + s->size() > reinterpret_cast<const char*>(data + size)) {
        std::abort();
      }
    }
  }
  return 0;
}
