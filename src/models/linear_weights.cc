#include "models/linear_weights.h"

#include <string>

#include "quant/fp8_weights.h"
#include "quant/int4_checkpoint.h"
#include "quant/int4_rtn.h"

namespace pagoda::models {

cpu::TensorView LinearWeightLoader::keep(quant::QuantizedMatrix matrix) {
  auto owned = std::make_shared<const quant::QuantizedMatrix>(std::move(matrix));
  cpu::TensorView view =
      cpu::dense_view(owned->bytes.data(), owned->dtype, owned->rows, owned->cols);
  if (!owned->input_permutation.empty()) view.input_permutation = owned->input_permutation.data();
  storage_.push_back(std::move(owned));
  return view;
}

StatusOr<cpu::TensorView> LinearWeightLoader::load(const Weights& w, std::string_view module,
                                                   std::int64_t rows, std::int64_t cols,
                                                   bool quantize_at_load) {
  const std::string name(module);
  const std::string full = files_.path + ": " + w.full_name(name);
  const QuantizationConfig& config = files_.quantization;
  if (const ModelTensor* qweight = w.find(name + ".qweight")) {
    quant::Int4CheckpointTensors t;
    t.qweight = qweight;
    t.qzeros = w.find(name + ".qzeros");
    t.scales = w.find(name + ".scales");
    t.g_idx = w.find(name + ".g_idx");
    if (config.method == QuantizationMethod::kGptq) {
      PAGODA_ASSIGN_OR_RETURN(quant::QuantizedMatrix m,
                              quant::repack_gptq(full, t, config, rows, cols));
      return keep(std::move(m));
    }
    if (config.method == QuantizationMethod::kAwq) {
      PAGODA_ASSIGN_OR_RETURN(quant::QuantizedMatrix m,
                              quant::repack_awq(full, t, config, rows, cols));
      return keep(std::move(m));
    }
    return invalid_argument(full +
                            ".qweight is a packed 4-bit weight, but config.json's "
                            "quantization_config does not say gptq or awq");
  }
  const ModelTensor* weight = w.find(name + ".weight");
  if (weight != nullptr && weight->dtype == DType::kF8E4M3) {
    const ModelTensor* scale = w.find(name + ".weight_scale");
    if (scale == nullptr) scale = w.find(name + ".weight_scale_inv");
    if (scale == nullptr) {
      return invalid_argument(full + ".weight is FP8 but neither " + name +
                              ".weight_scale nor .weight_scale_inv is stored");
    }
    PAGODA_ASSIGN_OR_RETURN(const ModelTensor* checked,
                            w.get(name + ".weight", {static_cast<std::uint64_t>(rows),
                                                     static_cast<std::uint64_t>(cols)}));
    PAGODA_ASSIGN_OR_RETURN(quant::QuantizedMatrix m,
                            quant::fp8_from_checkpoint(full, *checked, *scale, config, rows, cols));
    return keep(std::move(m));
  }
  PAGODA_ASSIGN_OR_RETURN(const ModelTensor* tensor,
                          w.get(name + ".weight", {static_cast<std::uint64_t>(rows),
                                                   static_cast<std::uint64_t>(cols)}));
  if (quantize_at_load && quantization_ == quant::LoadTimeQuantization::kFp8) {
    PAGODA_ASSIGN_OR_RETURN(quant::QuantizedMatrix m,
                            quant::quantize_fp8_per_channel(full, *tensor, rows, cols));
    return keep(std::move(m));
  }
  if (quantize_at_load && quantization_ == quant::LoadTimeQuantization::kInt4) {
    PAGODA_ASSIGN_OR_RETURN(quant::QuantizedMatrix m,
                            quant::quantize_int4_rtn(full, *tensor, rows, cols));
    return keep(std::move(m));
  }
  return cpu::dense_view(tensor->data.data(), tensor->dtype, rows, cols);
}

}  // namespace pagoda::models
