// One GGUF metadata value: a scalar, a string or a (possibly nested) array, typed as the file
// typed it. Strings point into the file's mapping, so a value lives no longer than its GgufFile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

namespace pagoda {

/// Metadata value types; the numeric values are the ones GGUF stores.
enum class GgufValueType : std::uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

/// Whether `raw` is one of the GGUF value types.
bool gguf_value_type_is_known(std::uint32_t raw);
/// "UINT32", "STRING", ... as gguf-py names them.
std::string_view gguf_value_type_name(GgufValueType type);
/// Whether the type is one of the eight integer types.
bool gguf_value_type_is_integer(GgufValueType type);
/// Bytes one stored value of a fixed-size type takes; 0 for STRING and ARRAY.
std::size_t gguf_value_type_size(GgufValueType type);

/// A typed metadata value.
struct GgufValue {
  /// Elements of an array of STRING or of ARRAY.
  using Array = std::vector<GgufValue>;
  /// Elements of an array of a fixed-size type, left packed in the file's bytes: a vocabulary's
  /// token types stay 4 bytes each instead of a GgufValue each, and a huge array cannot make the
  /// parser allocate many times the file size.
  struct Packed {
    std::span<const std::uint8_t> bytes;
    std::size_t count = 0;
  };

  GgufValueType type = GgufValueType::kUint8;
  /// Element type when `type` is kArray (an empty array still has one).
  GgufValueType element_type = GgufValueType::kUint8;
  /// uint64 for unsigned types, int64 for signed, double for floats, bool, string_view, and
  /// Array or Packed for arrays.
  std::variant<std::uint64_t, std::int64_t, double, bool, std::string_view, Array, Packed> value;

  /// Decodes one stored value of fixed-size `type` from `bytes` (gguf_value_type_size of them).
  static GgufValue decode(GgufValueType type, const std::uint8_t* bytes);

  /// Any integer type that fits int64; never a bool or float.
  std::optional<std::int64_t> as_int() const;
  /// A float or any integer type.
  std::optional<double> as_float() const;
  /// A bool only.
  std::optional<bool> as_bool() const;
  /// A string only.
  std::optional<std::string_view> as_string() const;
  /// Whether this is an array.
  bool is_array() const { return type == GgufValueType::kArray; }
  /// Number of elements of an array; 0 for other types.
  std::size_t array_size() const;
  /// Element `i` (< array_size()) of an array, decoded.
  GgufValue element(std::size_t i) const;
};

}  // namespace pagoda
