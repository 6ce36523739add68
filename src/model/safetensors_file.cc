#include "model/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/mapped_file.h"

namespace pagoda {

namespace {

using nlohmann::json;

// The format caps the header at 100 MB; a larger claim is corruption, not a big model.
constexpr std::uint64_t kMaxHeaderSize = 100'000'000;

}  // namespace

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::open(path));
  std::span<const std::uint8_t> bytes = mapped->bytes();
  return parse(path, bytes, std::move(mapped));
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(
    std::string path, std::span<const std::uint8_t> bytes, std::shared_ptr<const void> owner) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(path);
  file->owner_ = std::move(owner);
  PAGODA_RETURN_IF_ERROR(file->parse_header(bytes));
  return file;
}

Status SafetensorsFile::parse_header(std::span<const std::uint8_t> bytes) {
  auto error = [&](const std::string& problem) {
    return data_loss(path_ + ": " + problem + "; the safetensors file is corrupt or incomplete");
  };
  if (bytes.size() < 8) {
    return error("file is " + std::to_string(bytes.size()) +
                 " bytes, too short for the 8-byte header length");
  }
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > kMaxHeaderSize || header_size > bytes.size() - 8) {
    return error("header length " + std::to_string(header_size) + " exceeds the file size " +
                 std::to_string(bytes.size()) + " or the 100 MB limit");
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  json header = json::parse(header_begin, header_begin + header_size, nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return error("header is not a JSON object");
  }
  const std::span<const std::uint8_t> data = bytes.subspan(8 + header_size);
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return error("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return error("__metadata__ value '" + key + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string what = "tensor '" + name + "'";
    if (!entry.is_object()) return error(what + " is not an object");
    const json* dtype = entry.contains("dtype") ? &entry["dtype"] : nullptr;
    const json* shape = entry.contains("shape") ? &entry["shape"] : nullptr;
    const json* offsets = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
    if (dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array() ||
        offsets == nullptr || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
      return error(what + " needs a string dtype, a shape array and two unsigned data_offsets");
    }
    SafetensorsTensor t;
    t.name = name;
    std::optional<DType> parsed = dtype_from_safetensors(dtype->get<std::string>());
    if (!parsed) {
      return unimplemented(path_ + ": " + what + " has dtype " + dtype->get<std::string>() +
                           ", which is not supported; convert the checkpoint to F32, F16 or BF16");
    }
    t.dtype = *parsed;
    std::uint64_t num_elements = 1;
    constexpr auto kMaxElements =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (const json& dim : *shape) {
      if (!dim.is_number_unsigned()) return error(what + " has a shape entry that is not a count");
      const auto d = dim.get<std::uint64_t>();
      if (d > kMaxElements || (d != 0 && num_elements > kMaxElements / d)) {
        return error(what + " has a shape whose element count overflows int64");
      }
      num_elements *= d;
      t.shape.push_back(d);
    }
    t.begin = (*offsets)[0].get<std::uint64_t>();
    t.end = (*offsets)[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > data.size()) {
      return error(what + " data [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                   ") lies outside the data section of " + std::to_string(data.size()) + " bytes");
    }
    std::optional<std::uint64_t> expected = dtype_num_bytes(t.dtype, num_elements);
    if (!expected || *expected != t.end - t.begin) {
      return error(what + " holds " + std::to_string(t.end - t.begin) +
                   " bytes but its shape and " + std::string(dtype_name(t.dtype)) + " dtype need " +
                   (expected ? std::to_string(*expected) : std::string("more than 2^64")));
    }
    t.data = data.subspan(t.begin, t.end - t.begin);
    tensors_.push_back(std::move(t));
  }
  std::sort(tensors_.begin(), tensors_.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const SafetensorsTensor* previous = nullptr;  // the last tensor with bytes
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    const SafetensorsTensor& t = tensors_[i];
    if (t.begin == t.end) continue;
    if (previous != nullptr && t.begin < previous->end) {
      return error("tensors '" + previous->name + "' and '" + t.name +
                   "' overlap in the data section");
    }
    previous = &t;
  }
  for (std::size_t i = 0; i < tensors_.size(); ++i) tensor_index_.emplace(tensors_[i].name, i);
  return {};
}

const SafetensorsTensor* SafetensorsFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagoda
