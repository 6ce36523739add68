// One linear layer's weight in whatever form the checkpoint stores it, as a matrix the CPU
// matmul takes: a plain or GGUF-quantized `.weight` used in place from the mapped file, a GPTQ
// or AWQ layer (`.qweight` ...) repacked into Q4_Z, an FP8 `.weight` with its `.weight_scale`
// repacked into F8_S, or a plain weight quantized at load by `--quantization`.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "backend/cpu/tensor_view.h"
#include "model/model_files.h"
#include "models/weights.h"
#include "pagoda/status.h"
#include "quant/load_time_quantization.h"
#include "quant/quantized_matrix.h"

namespace pagoda::models {

/// Finds linear layers and keeps the storage of the ones it repacks.
class LinearWeightLoader {
 public:
  /// `files` must outlive the loader and the views it returns.
  LinearWeightLoader(const ModelFiles& files, quant::LoadTimeQuantization quantization)
      : files_(files), quantization_(quantization) {}

  /// The layer `module` under `w` ("q_proj" for "...self_attn.q_proj.weight") of shape
  /// [rows, cols]. `quantize_at_load` false keeps an unquantized weight as stored (lm_head).
  StatusOr<cpu::TensorView> load(const Weights& w, std::string_view module, std::int64_t rows,
                                 std::int64_t cols, bool quantize_at_load = true);

  /// The matrices repacked so far; the views point into them.
  std::vector<std::shared_ptr<const quant::QuantizedMatrix>> take_storage() {
    return std::move(storage_);
  }

 private:
  cpu::TensorView keep(quant::QuantizedMatrix matrix);

  const ModelFiles& files_;
  quant::LoadTimeQuantization quantization_;
  std::vector<std::shared_ptr<const quant::QuantizedMatrix>> storage_;
};

}  // namespace pagoda::models
