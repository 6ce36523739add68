// A .safetensors file, memory-mapped:
//
//   | header_size u64 LE | JSON header (header_size bytes) | data section |
//
// The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets from
// the start of the data section) plus an optional "__metadata__" object of strings.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/dtype.h"
#include "pagoda/status.h"

namespace pagoda {

/// One tensor of a safetensors file.
struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;
  /// Outermost dimension first (row-major).
  std::vector<std::uint64_t> shape;
  /// Byte range within the data section.
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  /// The tensor's bytes inside the mapping.
  std::span<const std::uint8_t> data;
};

/// A parsed safetensors file; tensor data points into its mapping.
class SafetensorsFile {
 public:
  /// Maps and parses `path`; every defect is a Status naming the file and the problem.
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  /// Parses `bytes`, which `owner` keeps alive; `path` names them in error messages.
  static StatusOr<std::unique_ptr<SafetensorsFile>> parse(std::string path,
                                                          std::span<const std::uint8_t> bytes,
                                                          std::shared_ptr<const void> owner);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  /// The path given to open().
  const std::string& path() const { return path_; }
  /// Tensors in data order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// The tensor named `name`; nullptr when absent.
  const SafetensorsTensor* find_tensor(std::string_view name) const;
  /// The header's "__metadata__" strings.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  Status parse_header(std::span<const std::uint8_t> bytes);

  std::string path_;
  std::shared_ptr<const void> owner_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace pagoda
