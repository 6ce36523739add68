#include "model/gguf_value.h"

#include <cstring>
#include <limits>

#include "common/check.h"

namespace pagoda {

bool gguf_value_type_is_known(std::uint32_t raw) {
  return raw <= static_cast<std::uint32_t>(GgufValueType::kFloat64);
}

std::string_view gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8: return "UINT8";
    case GgufValueType::kInt8: return "INT8";
    case GgufValueType::kUint16: return "UINT16";
    case GgufValueType::kInt16: return "INT16";
    case GgufValueType::kUint32: return "UINT32";
    case GgufValueType::kInt32: return "INT32";
    case GgufValueType::kFloat32: return "FLOAT32";
    case GgufValueType::kBool: return "BOOL";
    case GgufValueType::kString: return "STRING";
    case GgufValueType::kArray: return "ARRAY";
    case GgufValueType::kUint64: return "UINT64";
    case GgufValueType::kInt64: return "INT64";
    case GgufValueType::kFloat64: return "FLOAT64";
  }
  return "UNKNOWN";
}

bool gguf_value_type_is_integer(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

std::optional<std::int64_t> GgufValue::as_int() const {
  if (const auto* u = std::get_if<std::uint64_t>(&value)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return std::nullopt;
    }
    return static_cast<std::int64_t>(*u);
  }
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* u = std::get_if<std::uint64_t>(&value)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  return std::nullopt;
}

std::optional<std::string_view> GgufValue::as_string() const {
  if (const auto* s = std::get_if<std::string_view>(&value)) return *s;
  return std::nullopt;
}

std::size_t gguf_value_type_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64: return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray: return 0;
  }
  return 0;
}

namespace {

template <typename Stored>
Stored load(const std::uint8_t* bytes) {
  Stored v;
  std::memcpy(&v, bytes, sizeof(Stored));
  return v;
}

}  // namespace

GgufValue GgufValue::decode(GgufValueType type, const std::uint8_t* bytes) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::kUint8: v.value = std::uint64_t{load<std::uint8_t>(bytes)}; break;
    case GgufValueType::kInt8: v.value = std::int64_t{load<std::int8_t>(bytes)}; break;
    case GgufValueType::kUint16: v.value = std::uint64_t{load<std::uint16_t>(bytes)}; break;
    case GgufValueType::kInt16: v.value = std::int64_t{load<std::int16_t>(bytes)}; break;
    case GgufValueType::kUint32: v.value = std::uint64_t{load<std::uint32_t>(bytes)}; break;
    case GgufValueType::kInt32: v.value = std::int64_t{load<std::int32_t>(bytes)}; break;
    case GgufValueType::kUint64: v.value = load<std::uint64_t>(bytes); break;
    case GgufValueType::kInt64: v.value = load<std::int64_t>(bytes); break;
    case GgufValueType::kFloat32: v.value = double{load<float>(bytes)}; break;
    case GgufValueType::kFloat64: v.value = load<double>(bytes); break;
    case GgufValueType::kBool: v.value = bytes[0] != 0; break;
    case GgufValueType::kString:
    case GgufValueType::kArray: PAGODA_CHECK(false) << "not a fixed-size type"; break;
  }
  return v;
}

std::size_t GgufValue::array_size() const {
  if (const auto* packed = std::get_if<Packed>(&value)) return packed->count;
  if (const auto* array = std::get_if<Array>(&value)) return array->size();
  return 0;
}

GgufValue GgufValue::element(std::size_t i) const {
  PAGODA_CHECK_LT(i, array_size());
  if (const auto* packed = std::get_if<Packed>(&value)) {
    return decode(element_type, packed->bytes.data() + i * gguf_value_type_size(element_type));
  }
  return std::get<Array>(value)[i];
}

}  // namespace pagoda
