// Builds GGUF files byte by byte, so tests can write every kind of broken file.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace pagoda::testing {

/// Little-endian GGUF writer with no validation at all.
class GgufBytes {
 public:
  GgufBytes& u8(std::uint8_t v) { return raw(&v, 1); }
  GgufBytes& u32(std::uint32_t v) { return raw(&v, 4); }
  GgufBytes& u64(std::uint64_t v) { return raw(&v, 8); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  GgufBytes& header(std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
    raw("GGUF", 4);
    return u32(version).u64(tensors).u64(kvs);
  }
  GgufBytes& kv_string(std::string_view key, std::string_view value) {
    return str(key).u32(8).str(value);
  }
  GgufBytes& kv_u32(std::string_view key, std::uint32_t value) {
    return str(key).u32(4).u32(value);
  }
  GgufBytes& kv_f32(std::string_view key, float value) { return str(key).u32(6).raw(&value, 4); }
  /// A tensor info; `dims` innermost first, `type` a ggml type number.
  GgufBytes& tensor(std::string_view name, std::vector<std::uint64_t> dims, std::uint32_t type,
                    std::uint64_t offset) {
    str(name).u32(static_cast<std::uint32_t>(dims.size()));
    for (std::uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(std::size_t alignment) {
    while (bytes.size() % alignment != 0) u8(0);
    return *this;
  }
  GgufBytes& zeros(std::size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
  GgufBytes& raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }

  std::vector<std::uint8_t> bytes;
};

}  // namespace pagoda::testing
