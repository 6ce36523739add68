// A read-only memory map of a whole file. Model weights are used in place from the map, never
// copied, so a 16 GB checkpoint costs page cache, not heap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "pagoda/status.h"

namespace pagoda {

/// Owns one mapping; movable, not copyable. An empty file maps to an empty span.
class MappedFile {
 public:
  /// Maps `path` read-only; NOT_FOUND when it does not exist, INVALID_ARGUMENT when it is a folder.
  static StatusOr<std::shared_ptr<MappedFile>> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  std::size_t size() const { return size_; }

 private:
  MappedFile(std::string path, const std::uint8_t* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

/// Drops the whole pages inside `bytes`, which must lie in a MappedFile's mapping, from this
/// process's resident memory (madvise MADV_DONTNEED): the mapping is read-only, so a later read
/// maps the same file bytes again. For weights copied elsewhere whose file pages nothing reads
/// any more (interleave_weights.h).
void release_mapped_pages(std::span<const std::uint8_t> bytes);

/// Reads a whole (small) text file, e.g. config.json or a chat template.
StatusOr<std::string> read_text_file(const std::string& path);

}  // namespace pagoda
