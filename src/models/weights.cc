#include "models/weights.h"

#include "model/dequantize.h"
#include "models/weight_names.h"

namespace pagoda::models {

std::string shape_to_string(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Weights Weights::index(const ModelFiles& files) {
  auto table = std::make_shared<Table>();
  for (const ModelTensor& tensor : files.tensors) {
    if (files.format == ModelFormat::kHuggingFace) {
      table->emplace(tensor.name, &tensor);
    } else if (auto hf_name = hf_name_from_gguf(tensor.name, files.config.architecture)) {
      table->emplace(std::move(*hf_name), &tensor);
    }
  }
  return Weights(std::move(table), files.path, "");
}

Weights Weights::pp(std::string_view prefix) const {
  return Weights(table_, source_, prefix_ + std::string(prefix) + ".");
}

std::string Weights::full_name(std::string_view name) const {
  return prefix_ + std::string(name);
}

bool Weights::contains(std::string_view name) const {
  return table_->contains(full_name(name));
}

const ModelTensor* Weights::find(std::string_view name) const {
  auto it = table_->find(full_name(name));
  return it == table_->end() ? nullptr : it->second;
}

StatusOr<const ModelTensor*> Weights::get_optional(std::string_view name,
                                                   const Shape& shape) const {
  const std::string full = full_name(name);
  auto it = table_->find(full);
  if (it == table_->end()) return static_cast<const ModelTensor*>(nullptr);
  const ModelTensor& tensor = *it->second;
  if (tensor.shape != shape) {
    return invalid_argument(source_ + ": " + full + ": expected shape " + shape_to_string(shape) +
                            ", file has " + shape_to_string(tensor.shape));
  }
  if (!dequantize_supported(tensor.dtype)) {
    return unimplemented(
        source_ + ": " + full + ": tensor type " + std::string(dtype_name(tensor.dtype)) +
        " is not supported; use F32, F16, BF16, Q8_0, Q4_0, Q4_1, a K-quant or a GPTQ, AWQ or "
        "FP8 checkpoint");
  }
  return &tensor;
}

StatusOr<const ModelTensor*> Weights::get(std::string_view name, const Shape& shape) const {
  PAGODA_ASSIGN_OR_RETURN(const ModelTensor* tensor, get_optional(name, shape));
  if (tensor == nullptr) {
    return invalid_argument(source_ + ": missing tensor " + full_name(name) + " of shape " +
                            shape_to_string(shape));
  }
  return tensor;
}

StatusOr<std::vector<float>> Weights::get_f32(std::string_view name, const Shape& shape) const {
  PAGODA_ASSIGN_OR_RETURN(const ModelTensor* tensor, get(name, shape));
  std::vector<float> values(tensor->num_elements());
  Status status = dequantize(tensor->dtype, tensor->data, values);
  if (!status.ok()) {
    return Status(status.code(), source_ + ": " + full_name(name) + ": " + status.message());
  }
  return values;
}

}  // namespace pagoda::models
