// Model weights looked up by Hugging Face name through a prefix builder, so an architecture file
// reads `w.pp("model.layers.3").pp("self_attn").get("q_proj.weight", {n, k})` and every missing
// tensor, wrong shape or unusable type becomes a Status naming the tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/model_files.h"
#include "pagoda/status.h"

namespace pagoda::models {

/// Expected tensor shape, outermost dimension first (as HF writes it).
using Shape = std::vector<std::uint64_t>;

/// "[576, 576]".
std::string shape_to_string(const std::vector<std::uint64_t>& shape);

/// The tensors of one opened model by HF name, seen through a name prefix. Cheap to copy; the
/// ModelFiles it indexes must outlive it.
class Weights {
 public:
  /// Indexes `files`: HF names as stored, GGUF names translated by hf_name_from_gguf (tensors
  /// it does not know are left out).
  static Weights index(const ModelFiles& files);

  /// The same weights with `prefix` + "." before every name.
  Weights pp(std::string_view prefix) const;

  /// Whether the tensor `name` (under this prefix) exists.
  bool contains(std::string_view name) const;

  /// The tensor `name` as stored, unchecked (packed quantization tensors); nullptr when absent.
  const ModelTensor* find(std::string_view name) const;

  /// The tensor `name`, checked to have `shape` and a type the kernels decode.
  StatusOr<const ModelTensor*> get(std::string_view name, const Shape& shape) const;

  /// Like get(), but nullptr when the tensor is absent.
  StatusOr<const ModelTensor*> get_optional(std::string_view name, const Shape& shape) const;

  /// get() decoded to fp32: for small vectors (norm weights, biases) that ops take as floats.
  StatusOr<std::vector<float>> get_f32(std::string_view name, const Shape& shape) const;

  /// `name` with this view's prefix.
  std::string full_name(std::string_view name) const;

 private:
  using Table = std::unordered_map<std::string, const ModelTensor*>;

  Weights(std::shared_ptr<const Table> table, std::string source, std::string prefix)
      : table_(std::move(table)), source_(std::move(source)), prefix_(std::move(prefix)) {}

  std::shared_ptr<const Table> table_;
  std::string source_;  // The model path, for error messages.
  std::string prefix_;  // "" or "model.layers.3." (ends with a dot).
};

}  // namespace pagoda::models
