// Typed reads of one JSON object of a checkpoint's configuration (config.json and the objects in
// it), with errors that name the file and the full key. A key holding null counts as absent, as
// transformers treats it. Internal to pagoda_model: header-only over nlohmann::json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pagoda/status.h"

namespace pagoda {

class JsonFields {
 public:
  using json = nlohmann::json;

  /// Reads `object` of the file `path`; messages spell keys as `prefix` + key
  /// ("quantization_config.bits").
  JsonFields(const json& object, std::string path, std::string prefix = "")
      : object_(object), path_(std::move(path)), prefix_(std::move(prefix)) {}

  /// The value under `key`, or nullptr when absent or null.
  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  StatusOr<std::optional<std::int64_t>> optional_int(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<std::int64_t>();
    if (!v->is_number_integer()) return wrong_type(key, "an integer");
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > INT64_MAX) {
      return wrong_type(key, "an integer below 2^63");
    }
    return std::optional<std::int64_t>(v->get<std::int64_t>());
  }

  StatusOr<std::optional<double>> optional_float(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<double>();
    if (!v->is_number()) return wrong_type(key, "a number");
    return std::optional<double>(v->get<double>());
  }

  StatusOr<std::optional<bool>> optional_bool(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<bool>();
    if (!v->is_boolean()) return wrong_type(key, "true or false");
    return std::optional<bool>(v->get<bool>());
  }

  StatusOr<std::optional<std::string>> optional_string(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<std::string>();
    if (!v->is_string()) return wrong_type(key, "a string");
    return std::optional<std::string>(v->get<std::string>());
  }

  /// A list of strings; empty when absent.
  StatusOr<std::vector<std::string>> string_list(const std::string& key) const {
    std::vector<std::string> out;
    const json* v = find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) return wrong_type(key, "a list of strings");
    for (const json& e : *v) {
      if (!e.is_string()) return wrong_type(key, "a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }

  /// An int or a list of ints (eos_token_id may be either); empty when absent.
  StatusOr<std::vector<std::int64_t>> int_or_list(const std::string& key) const {
    const json* v = find(key);
    std::vector<std::int64_t> out;
    if (v == nullptr) return out;
    const json list = v->is_array() ? *v : json::array({*v});
    for (const json& e : list) {
      if (!e.is_number_integer()) return wrong_type(key, "an integer or a list of integers");
      out.push_back(e.get<std::int64_t>());
    }
    return out;
  }

  /// The key as messages spell it, quoted: "\"quantization_config.bits\"".
  std::string key_name(const std::string& key) const { return "\"" + prefix_ + key + "\""; }

  const std::string& path() const { return path_; }

  Status wrong_type(const std::string& key, const std::string& want) const {
    return invalid_argument(path_ + ": " + key_name(key) + " must be " + want);
  }

  /// A well-formed value Pagoda does not handle.
  Status unsupported(const std::string& key, const std::string& value,
                     const std::string& supported) const {
    return unimplemented(path_ + ": " + key_name(key) + " = " + value + " is not supported (" +
                         supported + ")");
  }

 private:
  const json& object_;
  std::string path_;
  std::string prefix_;
};

}  // namespace pagoda
