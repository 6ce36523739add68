#include "cli/device_options.h"

#include <cmath>

#include "quant/load_time_quantization.h"

namespace pagoda::cli {

namespace {

// The spellings --dtype accepts; the CUDA executor's own parser takes the same (and longer
// names), but this one also works in a build without CUDA.
StatusOr<cuda::ScalarType> parse_dtype(const std::string& text) {
  if (text == "bf16") return cuda::ScalarType::kBF16;
  if (text == "f16") return cuda::ScalarType::kF16;
  if (text == "f32") return cuda::ScalarType::kF32;
  return invalid_argument("--dtype must be bf16, f16 or f32, got \"" + text + "\"");
}

}  // namespace

void DeviceOptions::add_to(CLI::App& app) {
  app.add_option("--device", device,
                 "cuda or cpu (default: cuda when this build has CUDA and a GPU is visible)");
  app.add_option("--dtype", dtype,
                 "CUDA weights, activations and KV cache: bf16, f16 or f32 (the CPU computes in "
                 "fp32)")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                 "Share of GPU memory Pagoda may use, weights and KV cache included; the KV cache "
                 "gets what the weights and a profiling pass leave")
      ->capture_default_str();
  app.add_flag("--enforce-eager", enforce_eager,
               "CUDA: no CUDA graphs, every decode step launches its kernels one by one (slower; "
               "for debugging and comparison). Accepted on the CPU, where it changes nothing");
}

Status DeviceOptions::apply(const QuantizationOptions& quantization,
                            engine::ExecutorOptions& options) const {
  PAGODA_ASSIGN_OR_RETURN(options.device, engine::resolve_device(device));
  PAGODA_ASSIGN_OR_RETURN(options.dtype, parse_dtype(dtype));
  if (!(gpu_memory_utilization > 0.0 && gpu_memory_utilization <= 1.0)) {
    return invalid_argument("--gpu-memory-utilization must be in (0, 1], got " +
                            std::to_string(gpu_memory_utilization));
  }
  options.gpu_memory_utilization = gpu_memory_utilization;
  options.enforce_eager = enforce_eager;
  if (options.device == engine::Device::kCuda) {
    // CUDA keeps K/V in --dtype, or as FP8 codes; fp16 is --dtype f16.
    const std::string& kv = quantization.kv_cache_dtype;
    if (kv == "fp8" || kv == "fp8_e4m3") {
      options.fp8_kv_cache = true;
    } else if (kv != "auto") {
      return unimplemented("--kv-cache-dtype " + kv +
                           ": the CUDA backend keeps its KV cache in --dtype (--dtype f16 for an "
                           "fp16 cache) or as fp8; use auto or fp8");
    }
    PAGODA_ASSIGN_OR_RETURN(options.quantization,
                            quant::parse_load_time_quantization(quantization.quantization));
    return Status::ok_status();
  }
  PAGODA_ASSIGN_OR_RETURN(const CpuPrecision precision, quantization.for_cpu());
  precision.apply_activations();
  options.quantization = precision.quantization;
  options.kv_cache_dtype = precision.kv_cache_dtype;
  return Status::ok_status();
}

StatusOr<double> step_time_target_seconds(std::optional<double> ms, engine::Device device) {
  if (!ms) return device == engine::Device::kCpu ? kDefaultCpuStepTimeTargetMs / 1e3 : 0.0;
  if (!(*ms >= 0.0) || !std::isfinite(*ms)) {
    return invalid_argument("--step-time-target-ms must be a number of milliseconds >= 0 (0: off)");
  }
  return *ms / 1e3;
}

std::string DeviceOptions::label(engine::Device chosen) const {
  if (chosen == engine::Device::kCpu) return "cpu";
  return "cuda (" + dtype + ")";
}

}  // namespace pagoda::cli
