#include "cli/quantization_options.h"

namespace pagoda::cli {

void QuantizationOptions::add_to(CLI::App& app) {
  app.add_option("--quantization", quantization,
                 "Quantize an unquantized model's linear weights at load: none, fp8 (E4M3, "
                 "per-channel scales) or int4 (4-bit RTN, group 128). GPTQ, AWQ and FP8 "
                 "checkpoints need no flag")
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache precision: auto (fp32 on the CPU, --dtype on CUDA), fp16 (CPU: half "
                 "the cache memory and bytes read per step; logprobs move by ~1e-3) or fp8 / "
                 "fp8_e4m3 (CUDA with bf16/f16: e4m3 codes, half a 16-bit cache's bytes, so "
                 "twice the tokens)")
      ->capture_default_str();
  app.add_option("--cpu-activations", cpu_activations,
                 "CPU: what matmuls on quantized weights round their activations to: int16 (the "
                 "default on AVX2: logprobs within 1e-2 of fp32), int8 (llama.cpp's precision: "
                 "prefill and batched decode up to 1.5x faster on AVX-512 VNNI, logprobs move "
                 "by ~0.1 and greedy tokens can differ), fp32, or auto (PAGODA_CPU_ACTIVATIONS, "
                 "else int16)")
      ->capture_default_str();
}

void CpuPrecision::apply_activations() const {
  if (activations) cpu::set_cpu_activations(*activations);
}

StatusOr<CpuPrecision> QuantizationOptions::for_cpu() const {
  CpuPrecision out;
  if (kv_cache_dtype == "fp16") {
    out.kv_cache_dtype = cpu::KvDtype::kF16;
  } else if (kv_cache_dtype == "fp8" || kv_cache_dtype == "fp8_e4m3") {
    return unimplemented("--kv-cache-dtype " + kv_cache_dtype +
                         " is for the GPU; the CPU keeps its KV cache in fp32 or fp16 (use auto "
                         "or fp16)");
  } else if (kv_cache_dtype != "auto") {
    return invalid_argument("--kv-cache-dtype \"" + kv_cache_dtype +
                            "\" is not supported; use auto or fp16");
  }
  if (cpu_activations == "fp32") {
    out.activations = cpu::CpuActivations::kFp32;
  } else if (cpu_activations == "int16" || cpu_activations == "int8") {
    if (!cpu::cpu_has_avx2()) {
      return unimplemented("--cpu-activations " + cpu_activations +
                           " needs a CPU with AVX2; this one runs fp32 activations");
    }
    out.activations =
        cpu_activations == "int8" ? cpu::CpuActivations::kInt8 : cpu::CpuActivations::kInt16;
  } else if (cpu_activations != "auto") {
    return invalid_argument("--cpu-activations \"" + cpu_activations +
                            "\" is not supported; use auto, int16, int8 or fp32");
  }
  PAGODA_ASSIGN_OR_RETURN(out.quantization, quant::parse_load_time_quantization(quantization));
  return out;
}

}  // namespace pagoda::cli
