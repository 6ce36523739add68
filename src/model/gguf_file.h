// A GGUF model file (versions 2 and 3), memory-mapped. Opening it parses and bounds-checks the
// header, every metadata value and every tensor info; tensor bytes stay in the mapping.
//
//   | "GGUF" | version u32 | tensor_count u64 | kv_count u64 |
//   | kv_count x (key string, value type u32, value) |
//   | tensor_count x (name string, n_dims u32, dims u64[n_dims], ggml type u32, offset u64) |
//   | padding to general.alignment (default 32) | data section: tensor bytes at their offsets |
//
// Strings are a u64 byte length then the bytes; everything is little-endian.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/dtype.h"
#include "model/gguf_value.h"
#include "pagoda/status.h"

namespace pagoda {

/// One metadata entry, in file order.
struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

/// Where one tensor is and what it holds.
struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  /// GGUF order: dims[0] is the innermost (contiguous) dimension, i.e. the row length.
  std::vector<std::uint64_t> dims;
  /// Byte offset from the start of the data section.
  std::uint64_t offset = 0;
  std::uint64_t num_elements = 0;
  std::uint64_t num_bytes = 0;
  /// The tensor's bytes inside the mapping.
  std::span<const std::uint8_t> data;
};

/// A parsed GGUF file; strings and tensor data point into its mapping.
class GgufFile {
 public:
  /// Maps and parses `path`; every defect is a Status naming the file and the problem.
  static StatusOr<std::unique_ptr<GgufFile>> open(const std::string& path);
  /// Parses `bytes`, which `owner` keeps alive; `path` names them in error messages.
  static StatusOr<std::unique_ptr<GgufFile>> parse(std::string path,
                                                   std::span<const std::uint8_t> bytes,
                                                   std::shared_ptr<const void> owner);

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  /// The path given to open().
  const std::string& path() const { return path_; }
  /// 2 or 3.
  std::uint32_t version() const { return version_; }
  /// general.alignment, or 32 when absent.
  std::uint64_t alignment() const { return alignment_; }
  /// File offset where the data section starts.
  std::uint64_t data_offset() const { return data_offset_; }

  /// All metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  /// The value stored under `key`; nullptr when absent.
  const GgufValue* find(std::string_view key) const;
  /// Whether `key` is present.
  bool has_key(std::string_view key) const { return find(key) != nullptr; }
  /// A STRING value.
  std::optional<std::string> get_string(std::string_view key) const;
  /// Any integer type that fits int64.
  std::optional<std::int64_t> get_int(std::string_view key) const;
  /// FLOAT32/FLOAT64, or an integer converted.
  std::optional<double> get_float(std::string_view key) const;
  /// A BOOL value.
  std::optional<bool> get_bool(std::string_view key) const;
  /// An array of STRING.
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;
  /// An array of integers that all fit int64.
  std::optional<std::vector<std::int64_t>> get_int_array(std::string_view key) const;
  /// An array of floats or integers.
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;

  /// All tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// The tensor named `name`; nullptr when absent.
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class GgufParser;

  std::string path_;
  std::shared_ptr<const void> owner_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, std::size_t, std::less<>> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace pagoda
