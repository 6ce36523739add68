#include "cli/quantization_options.h"

namespace pagoda::cli {

void QuantizationOptions::add_to(CLI::App& app) {
  app.add_option("--quantization", quantization,
                 "Quantize an unquantized model's linear weights at load: none, fp8 (E4M3, "
                 "per-channel scales) or int4 (4-bit RTN, group 128). GPTQ, AWQ and FP8 "
                 "checkpoints need no flag")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache precision: auto (fp32 on the CPU) or fp8 (GPU only)")
      ->capture_default_str();
}

StatusOr<quant::LoadTimeQuantization> QuantizationOptions::for_cpu() const {
  if (kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3") {
    return unimplemented("--kv-cache-dtype " + kv_cache_dtype +
                         " is for the GPU; the CPU keeps its KV cache in fp32 (use auto)");
  }
  if (kv_cache_dtype != "auto") {
    return invalid_argument("--kv-cache-dtype \"" + kv_cache_dtype +
                            "\" is not supported; use auto or fp8");
  }
  return quant::parse_load_time_quantization(quantization);
}

}  // namespace pagoda::cli
