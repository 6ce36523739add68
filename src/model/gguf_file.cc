#include "model/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "common/mapped_file.h"

namespace pagoda {

namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr std::uint32_t kMaxDims = 4;             // ggml tensors have at most four dimensions
constexpr int kMaxArrayDepth = 8;                 // deeper nesting only serves to exhaust the stack

// The smallest encoding of one value of `type`, so that an array count can be checked against
// the bytes left before anything is allocated.
std::uint64_t min_encoded_size(GgufValueType type) {
  if (type == GgufValueType::kString) return 8;  // the length
  if (type == GgufValueType::kArray) return 12;  // element type and count
  return gguf_value_type_size(type);
}

std::uint32_t byte_swap32(std::uint32_t v) {
  return ((v & 0xff) << 24) | ((v & 0xff00) << 8) | ((v >> 8) & 0xff00) | (v >> 24);
}

}  // namespace

// Walks the bytes once, front to back; every read checks the bytes left first.
class GgufParser {
 public:
  GgufParser(GgufFile& file, std::span<const std::uint8_t> bytes) : file_(file), bytes_(bytes) {}

  Status parse() {
    PAGODA_RETURN_IF_ERROR(parse_header());
    for (std::uint64_t i = 0; i < kv_count_; ++i) PAGODA_RETURN_IF_ERROR(parse_key_value(i));
    PAGODA_RETURN_IF_ERROR(read_alignment());
    for (std::uint64_t i = 0; i < tensor_count_; ++i) PAGODA_RETURN_IF_ERROR(parse_tensor_info(i));
    return place_tensors();
  }

 private:
  Status error(const std::string& problem) const { return data_loss(file_.path_ + ": " + problem); }

  Status truncated(const std::string& what) const {
    return data_loss(file_.path_ + ": truncated while reading " + what + " at offset " +
                     std::to_string(pos_) + " (file size " + std::to_string(bytes_.size()) +
                     "); the file is incomplete or not a GGUF file, download or convert it again");
  }

  std::uint64_t remaining() const { return bytes_.size() - pos_; }

  template <typename T>
  Status read(T& out, const std::string& what) {
    if (remaining() < sizeof(T)) return truncated(what);
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return {};
  }

  Status read_string(std::string_view& out, const std::string& what) {
    std::uint64_t length = 0;
    PAGODA_RETURN_IF_ERROR(read(length, what + " length"));
    if (length > remaining()) {
      return error(what + " claims " + std::to_string(length) + " bytes at offset " +
                   std::to_string(pos_) + " but only " + std::to_string(remaining()) +
                   " remain; the file is corrupt");
    }
    out = std::string_view(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return {};
  }

  Status parse_header() {
    if (bytes_.empty()) return error("file is empty; expected a GGUF model file");
    std::uint32_t magic = 0;
    PAGODA_RETURN_IF_ERROR(read(magic, "the magic number"));
    if (magic != kGgufMagic) {
      return error(
          "not a GGUF file (the first 4 bytes are not \"GGUF\"); pass a .gguf model or a "
          "Hugging Face model folder");
    }
    PAGODA_RETURN_IF_ERROR(read(file_.version_, "the version"));
    const std::uint32_t version = file_.version_;
    if (version == 1) {
      return error(
          "GGUF version 1 is not supported (only 2 and 3); convert the model again with a "
          "current llama.cpp convert_hf_to_gguf.py");
    }
    if (byte_swap32(version) == 2 || byte_swap32(version) == 3) {
      return error("big-endian GGUF files are not supported; use a little-endian conversion");
    }
    if (version != 2 && version != 3) {
      return error("unsupported GGUF version " + std::to_string(version) +
                   " (only 2 and 3 are supported)");
    }
    PAGODA_RETURN_IF_ERROR(read(tensor_count_, "the tensor count"));
    PAGODA_RETURN_IF_ERROR(read(kv_count_, "the metadata count"));
    // Each entry takes some bytes, so counts beyond the file size are lies; catching them here
    // keeps the error message about the count rather than a later truncation.
    if (kv_count_ > remaining() / 13) {
      return error("header claims " + std::to_string(kv_count_) +
                   " metadata entries, more than the file can hold; the file is corrupt");
    }
    if (tensor_count_ > remaining() / 24) {
      return error("header claims " + std::to_string(tensor_count_) +
                   " tensors, more than the file can hold; the file is corrupt");
    }
    return {};
  }

  Status parse_value(GgufValueType type, int depth, const std::string& what, GgufValue& out) {
    if (type == GgufValueType::kArray) return parse_array(depth, what, out);
    if (type == GgufValueType::kString) {
      std::string_view s;
      PAGODA_RETURN_IF_ERROR(read_string(s, what));
      out.type = type;
      out.value = s;
      return {};
    }
    const std::size_t size = gguf_value_type_size(type);
    if (remaining() < size) return truncated(what);
    PAGODA_RETURN_IF_ERROR(check_bools(type, bytes_.subspan(pos_, size), what));
    out = GgufValue::decode(type, bytes_.data() + pos_);
    pos_ += size;
    return {};
  }

  Status check_bools(GgufValueType type, std::span<const std::uint8_t> values,
                     const std::string& what) const {
    if (type != GgufValueType::kBool) return {};
    for (std::uint8_t b : values) {
      if (b > 1) {
        return error(what + " is a BOOL with byte value " + std::to_string(b) +
                     " (must be 0 or 1); the file is corrupt");
      }
    }
    return {};
  }

  Status parse_array(int depth, const std::string& what, GgufValue& out) {
    if (depth >= kMaxArrayDepth) {
      return error(what + " nests arrays more than " + std::to_string(kMaxArrayDepth) +
                   " deep; the file is corrupt");
    }
    std::uint32_t raw_type = 0;
    PAGODA_RETURN_IF_ERROR(read(raw_type, what + " element type"));
    if (!gguf_value_type_is_known(raw_type)) {
      return error(what + " has unknown array element type " + std::to_string(raw_type) +
                   "; the file is corrupt or from a newer GGUF writer");
    }
    const auto element_type = static_cast<GgufValueType>(raw_type);
    std::uint64_t count = 0;
    PAGODA_RETURN_IF_ERROR(read(count, what + " element count"));
    if (count > remaining() / min_encoded_size(element_type)) {
      return error(what + " claims " + std::to_string(count) + " " +
                   std::string(gguf_value_type_name(element_type)) + " elements but only " +
                   std::to_string(remaining()) + " bytes remain; the file is corrupt");
    }
    out.type = GgufValueType::kArray;
    out.element_type = element_type;
    if (const std::size_t size = gguf_value_type_size(element_type); size != 0) {
      const std::span<const std::uint8_t> packed = bytes_.subspan(pos_, count * size);
      PAGODA_RETURN_IF_ERROR(check_bools(element_type, packed, what));
      out.value = GgufValue::Packed{packed, static_cast<std::size_t>(count)};
      pos_ += packed.size();
      return {};
    }
    GgufValue::Array elements(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      PAGODA_RETURN_IF_ERROR(parse_value(element_type, depth + 1, what, elements[i]));
    }
    out.value = std::move(elements);
    return {};
  }

  Status parse_key_value(std::uint64_t index) {
    const std::string entry = "metadata entry " + std::to_string(index);
    std::string_view key;
    PAGODA_RETURN_IF_ERROR(read_string(key, entry + " key"));
    const std::string what = "metadata '" + std::string(key) + "'";
    if (file_.key_index_.count(key) != 0) {
      return error(what + " appears twice; the file is corrupt");
    }
    std::uint32_t raw_type = 0;
    PAGODA_RETURN_IF_ERROR(read(raw_type, what + " value type"));
    if (!gguf_value_type_is_known(raw_type)) {
      return error(what + " has unknown value type " + std::to_string(raw_type) +
                   "; the file is corrupt or from a newer GGUF writer");
    }
    GgufKeyValue kv{std::string(key), {}};
    PAGODA_RETURN_IF_ERROR(parse_value(static_cast<GgufValueType>(raw_type), 0, what, kv.value));
    file_.key_index_.emplace(kv.key, file_.metadata_.size());
    file_.metadata_.push_back(std::move(kv));
    return {};
  }

  Status read_alignment() {
    const GgufValue* v = file_.find("general.alignment");
    if (v == nullptr) return {};
    std::optional<std::int64_t> a = v->as_int();
    if (!a || *a <= 0 || (*a & (*a - 1)) != 0) {
      return error("general.alignment must be a positive power of two; the file is corrupt");
    }
    file_.alignment_ = static_cast<std::uint64_t>(*a);
    return {};
  }

  Status parse_tensor_info(std::uint64_t index) {
    GgufTensorInfo info;
    std::string_view name;
    PAGODA_RETURN_IF_ERROR(read_string(name, "tensor info " + std::to_string(index) + " name"));
    info.name = std::string(name);
    const std::string what = "tensor '" + info.name + "'";
    if (file_.tensor_index_.count(info.name) != 0) {
      return error(what + " appears twice; the file is corrupt");
    }
    std::uint32_t n_dims = 0;
    PAGODA_RETURN_IF_ERROR(read(n_dims, what + " dimension count"));
    if (n_dims > kMaxDims) {
      return error(what + " has " + std::to_string(n_dims) + " dimensions (at most " +
                   std::to_string(kMaxDims) + " are allowed); the file is corrupt");
    }
    info.dims.resize(n_dims);
    std::uint64_t num_elements = 1;
    constexpr auto kMaxElements =
        static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      PAGODA_RETURN_IF_ERROR(read(info.dims[d], what + " dimension"));
      const std::uint64_t dim = info.dims[d];
      if (dim > kMaxElements || (dim != 0 && num_elements > kMaxElements / dim)) {
        return error(what +
                     " has dimensions whose element count overflows int64; the file is "
                     "corrupt");
      }
      num_elements *= dim;
    }
    info.num_elements = num_elements;
    std::uint32_t raw_type = 0;
    PAGODA_RETURN_IF_ERROR(read(raw_type, what + " type"));
    std::optional<DType> dtype = dtype_from_ggml(raw_type);
    if (!dtype) {
      return error(what + " has unknown ggml type " + std::to_string(raw_type) +
                   "; the file is corrupt or uses a quantization this build does not know");
    }
    info.dtype = *dtype;
    const DTypeInfo& type_info = dtype_info(info.dtype);
    const std::uint64_t row = n_dims == 0 ? 1 : info.dims[0];
    if (row % static_cast<std::uint64_t>(type_info.block_size) != 0) {
      return error(what + " has rows of " + std::to_string(row) + " elements, not a multiple of " +
                   std::string(type_info.name) + "'s block size " +
                   std::to_string(type_info.block_size) + "; the file is corrupt");
    }
    std::optional<std::uint64_t> num_bytes = dtype_num_bytes(info.dtype, num_elements);
    if (!num_bytes) return error(what + " byte size overflows; the file is corrupt");
    info.num_bytes = *num_bytes;
    PAGODA_RETURN_IF_ERROR(read(info.offset, what + " offset"));
    file_.tensor_index_.emplace(info.name, file_.tensors_.size());
    file_.tensors_.push_back(std::move(info));
    return {};
  }

  Status place_tensors() {
    const std::uint64_t alignment = file_.alignment_;
    const std::uint64_t size = bytes_.size();
    // The data section starts at the next multiple of the alignment after the tensor infos.
    const std::uint64_t data_offset = (pos_ + alignment - 1) / alignment * alignment;
    file_.data_offset_ = data_offset;
    const std::uint64_t data_size = data_offset <= size ? size - data_offset : 0;
    for (GgufTensorInfo& t : file_.tensors_) {
      const std::string where = "tensor '" + t.name + "' data [offset " + std::to_string(t.offset) +
                                ", " + std::to_string(t.num_bytes) + " bytes]";
      if (t.offset % alignment != 0) {
        return error(where + " is not aligned to " + std::to_string(alignment) +
                     " bytes; the file is corrupt");
      }
      if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
        return error(where + " extends past end of file (size " + std::to_string(size) +
                     ", data section starts at " + std::to_string(data_offset) +
                     "); the file is truncated, download it again");
      }
      t.data = bytes_.subspan(data_offset + t.offset, t.num_bytes);
    }
    return check_no_overlap();
  }

  Status check_no_overlap() const {
    std::vector<const GgufTensorInfo*> by_offset;
    by_offset.reserve(file_.tensors_.size());
    for (const GgufTensorInfo& t : file_.tensors_) {
      if (t.num_bytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensorInfo& prev = *by_offset[i - 1];
      if (prev.offset + prev.num_bytes > by_offset[i]->offset) {
        return error("tensors '" + prev.name + "' and '" + by_offset[i]->name +
                     "' overlap in the data section; the file is corrupt");
      }
    }
    return {};
  }

  GgufFile& file_;
  std::span<const std::uint8_t> bytes_;
  std::uint64_t pos_ = 0;
  std::uint64_t tensor_count_ = 0;
  std::uint64_t kv_count_ = 0;
};

StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> mapped, MappedFile::open(path));
  std::span<const std::uint8_t> bytes = mapped->bytes();
  return parse(path, bytes, std::move(mapped));
}

StatusOr<std::unique_ptr<GgufFile>> GgufFile::parse(std::string path,
                                                    std::span<const std::uint8_t> bytes,
                                                    std::shared_ptr<const void> owner) {
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->path_ = std::move(path);
  file->owner_ = std::move(owner);
  GgufParser parser(*file, bytes);
  PAGODA_RETURN_IF_ERROR(parser.parse());
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  std::optional<std::string_view> s = v->as_string();
  if (!s) return std::nullopt;
  return std::string(*s);
}

std::optional<std::int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  return v == nullptr ? std::nullopt : v->as_int();
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  return v == nullptr ? std::nullopt : v->as_float();
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  return v == nullptr ? std::nullopt : v->as_bool();
}

namespace {

// Converts every element of the array under `v`; nullopt when `v` is not an array or any element
// does not convert.
template <typename T, typename Convert>
std::optional<std::vector<T>> convert_array(const GgufValue* v, Convert convert) {
  if (v == nullptr || !v->is_array()) return std::nullopt;
  std::vector<T> out;
  out.reserve(v->array_size());
  for (std::size_t i = 0; i < v->array_size(); ++i) {
    auto converted = convert(v->element(i));
    if (!converted) return std::nullopt;
    out.push_back(T(*converted));
  }
  return out;
}

}  // namespace

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  return convert_array<std::string>(find(key), [](const GgufValue& e) { return e.as_string(); });
}

std::optional<std::vector<std::int64_t>> GgufFile::get_int_array(std::string_view key) const {
  return convert_array<std::int64_t>(find(key), [](const GgufValue& e) { return e.as_int(); });
}

std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  return convert_array<double>(find(key), [](const GgufValue& e) { return e.as_float(); });
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace pagoda
