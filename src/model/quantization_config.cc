#include "model/quantization_config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "model/json_fields.h"

namespace pagoda {

namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Group sizes the Q4_Z repacking can express: a 32-weight block must never span two groups.
Status check_int4_group_size(const JsonFields& f, const std::string& key, std::int64_t group_size) {
  if (group_size == -1 || (group_size > 0 && group_size % 32 == 0)) return {};
  return f.unsupported(key, std::to_string(group_size), "-1 (per channel) or a multiple of 32");
}

Status read_gptq(const JsonFields& f, QuantizationConfig& q) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> bits, f.optional_int("bits"));
  if (!bits || *bits != 4) {
    return f.unsupported("bits", bits ? std::to_string(*bits) : "missing", "only 4-bit GPTQ");
  }
  q.bits = 4;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> group_size, f.optional_int("group_size"));
  q.group_size = group_size.value_or(-1);
  PAGODA_RETURN_IF_ERROR(check_int4_group_size(f, "group_size", q.group_size));
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> sym, f.optional_bool("sym"));
  q.symmetric = sym.value_or(true);
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> desc_act, f.optional_bool("desc_act"));
  q.desc_act = desc_act.value_or(false);
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> marlin, f.optional_bool("is_marlin_format"));
  if (marlin.value_or(false)) {
    return f.unsupported("is_marlin_format", "true", "only the GPTQ serialization; re-export it");
  }
  // transformers writes checkpoint_format; GPTQModel's own files say format.
  std::string format_key = "checkpoint_format";
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> format, f.optional_string(format_key));
  if (!format) {
    format_key = "format";
    PAGODA_ASSIGN_OR_RETURN(format, f.optional_string(format_key));
  }
  const std::string fmt = lower(format.value_or("gptq"));
  if (fmt == "gptq") {
    q.zeros_stored_minus_one = true;
  } else if (fmt == "gptq_v2") {
    q.zeros_stored_minus_one = false;
  } else {
    return f.unsupported(format_key, "\"" + *format + "\"",
                         "gptq and gptq_v2; marlin, bitblas and other kernel-specific "
                         "serializations are not");
  }
  PAGODA_ASSIGN_OR_RETURN(q.ignored_modules, f.string_list("modules_to_not_convert"));
  return {};
}

Status read_awq(const JsonFields& f, QuantizationConfig& q) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> bits, f.optional_int("bits"));
  if (!bits) {
    PAGODA_ASSIGN_OR_RETURN(bits, f.optional_int("w_bit"));
  }
  if (!bits || *bits != 4) {
    return f.unsupported("bits", bits ? std::to_string(*bits) : "missing", "only 4-bit AWQ");
  }
  q.bits = 4;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> group_size, f.optional_int("group_size"));
  if (!group_size) {
    PAGODA_ASSIGN_OR_RETURN(group_size, f.optional_int("q_group_size"));
  }
  q.group_size = group_size.value_or(128);
  PAGODA_RETURN_IF_ERROR(check_int4_group_size(f, "group_size", q.group_size));
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> zero_point, f.optional_bool("zero_point"));
  if (!zero_point.value_or(true)) {
    return f.unsupported("zero_point", "false", "AWQ with zero points only");
  }
  q.symmetric = false;
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> version, f.optional_string("version"));
  if (lower(version.value_or("gemm")) != "gemm") {
    return f.unsupported("version", "\"" + *version + "\"",
                         "only the GEMM packing; gemv, exllama, ipex and marlin are not");
  }
  PAGODA_ASSIGN_OR_RETURN(q.ignored_modules, f.string_list("modules_to_not_convert"));
  return {};
}

Status read_fp8_block_size(const JsonFields& f, const std::string& key, const json& value,
                           QuantizationConfig& q) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() ||
      !value[1].is_number_integer()) {
    return f.wrong_type(key, "[block_rows, block_cols]");
  }
  const auto rows = value[0].get<std::int64_t>();
  const auto cols = value[1].get<std::int64_t>();
  // Each 32-weight F8_S block carries one scale, so a scale tile must cover whole blocks.
  if (rows <= 0 || cols <= 0 || cols % 32 != 0) {
    return f.unsupported(key, value.dump(), "positive sizes with block_cols a multiple of 32");
  }
  q.fp8_strategy = Fp8ScaleStrategy::kBlock;
  q.fp8_block_size = {rows, cols};
  return {};
}

Status read_compressed_tensors(const JsonFields& f, const std::string& path,
                               QuantizationConfig& q) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> format, f.optional_string("format"));
  const std::string fmt = format.value_or("float-quantized");
  if (fmt != "float-quantized" && fmt != "naive-quantized") {
    return f.unsupported("format", "\"" + fmt + "\"",
                         "float-quantized and naive-quantized FP8; pack-quantized int4 and "
                         "sparse formats are not");
  }
  const json* groups = f.find("config_groups");
  if (groups == nullptr || !groups->is_object() || groups->empty()) {
    return f.wrong_type("config_groups", "an object of quantization schemes");
  }
  bool first = true;
  for (const auto& [name, group] : groups->items()) {
    const std::string prefix = "quantization_config.config_groups." + name + ".weights.";
    const json* weights =
        group.is_object() && group.contains("weights") ? &group["weights"] : nullptr;
    if (weights == nullptr || !weights->is_object()) {
      return invalid_argument(path + ": \"quantization_config.config_groups." + name +
                              ".weights\" must be an object");
    }
    const JsonFields w(*weights, path, prefix);
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> bits, w.optional_int("num_bits"));
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> type, w.optional_string("type"));
    if (bits.value_or(0) != 8 || type.value_or("") != "float") {
      return w.unsupported(
          "num_bits", std::to_string(bits.value_or(0)) + " with type \"" + type.value_or("") + "\"",
          "8-bit float (FP8 E4M3) weights only");
    }
    PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> strategy, w.optional_string("strategy"));
    QuantizationConfig parsed;
    const std::string s = strategy.value_or("tensor");
    if (s == "tensor") {
      parsed.fp8_strategy = Fp8ScaleStrategy::kTensor;
    } else if (s == "channel") {
      parsed.fp8_strategy = Fp8ScaleStrategy::kChannel;
    } else if (s == "block") {
      const json* block = w.find("block_structure");
      if (block == nullptr) return w.wrong_type("block_structure", "[block_rows, block_cols]");
      PAGODA_RETURN_IF_ERROR(read_fp8_block_size(w, "block_structure", *block, parsed));
    } else {
      return w.unsupported("strategy", "\"" + s + "\"", "tensor, channel and block");
    }
    if (!first &&
        (parsed.fp8_strategy != q.fp8_strategy || parsed.fp8_block_size != q.fp8_block_size)) {
      return unimplemented(path +
                           ": config_groups with different FP8 weight strategies are "
                           "not supported");
    }
    q.fp8_strategy = parsed.fp8_strategy;
    q.fp8_block_size = parsed.fp8_block_size;
    first = false;
  }
  q.bits = 8;
  PAGODA_ASSIGN_OR_RETURN(q.ignored_modules, f.string_list("ignore"));
  return {};
}

Status read_fp8(const JsonFields& f, QuantizationConfig& q) {
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> fmt, f.optional_string("fmt"));
  if (fmt && *fmt != "e4m3") return f.unsupported("fmt", "\"" + *fmt + "\"", "e4m3 only");
  q.bits = 8;
  q.fp8_strategy = Fp8ScaleStrategy::kTensor;
  if (const json* block = f.find("weight_block_size")) {
    PAGODA_RETURN_IF_ERROR(read_fp8_block_size(f, "weight_block_size", *block, q));
  }
  PAGODA_ASSIGN_OR_RETURN(q.ignored_modules, f.string_list("modules_to_not_convert"));
  return {};
}

// `kv_cache_scheme`: {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false}.
// Per-head scales ("attn_head") and dynamic ones have no CUDA kernel path yet.
Status read_kv_cache_scheme(const json& scheme, const std::string& path, const std::string& key,
                            QuantizationConfig& q) {
  if (scheme.is_null()) return {};
  if (!scheme.is_object()) {
    return invalid_argument(path + ": \"" + key + "kv_cache_scheme\" must be an object");
  }
  const JsonFields f(scheme, path, key + "kv_cache_scheme.");
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::int64_t> bits, f.optional_int("num_bits"));
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> type, f.optional_string("type"));
  if (bits.value_or(0) != 8 || type.value_or("") != "float") {
    return f.unsupported(
        "num_bits", std::to_string(bits.value_or(0)) + " with type \"" + type.value_or("") + "\"",
        "an 8-bit float (FP8 E4M3) KV cache only");
  }
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> strategy, f.optional_string("strategy"));
  if (strategy.value_or("tensor") != "tensor") {
    return f.unsupported("strategy", "\"" + *strategy + "\"", "per-tensor KV cache scales only");
  }
  PAGODA_ASSIGN_OR_RETURN(std::optional<bool> dynamic, f.optional_bool("dynamic"));
  if (dynamic.value_or(false)) {
    return f.unsupported("dynamic", "true", "static (calibrated) KV cache scales only");
  }
  q.fp8_kv_cache = true;
  return {};
}

}  // namespace

std::string_view quantization_method_name(QuantizationMethod method) {
  switch (method) {
    case QuantizationMethod::kNone: return "none";
    case QuantizationMethod::kGptq: return "gptq";
    case QuantizationMethod::kAwq: return "awq";
    case QuantizationMethod::kCompressedTensorsFp8: return "compressed-tensors";
    case QuantizationMethod::kFp8: return "fp8";
  }
  return "?";
}

std::string QuantizationConfig::summary() const {
  if (fp8_kv_cache) return weights_summary() + ", FP8 KV cache (per-tensor scales)";
  return weights_summary();
}

std::string QuantizationConfig::weights_summary() const {
  std::string out(quantization_method_name(method));
  if (method == QuantizationMethod::kNone) return out;
  if (bits == 4) {
    out += " 4-bit, ";
    out += group_size == -1 ? std::string("per channel") : "group " + std::to_string(group_size);
    out += symmetric ? ", sym" : ", asym";
    if (desc_act) out += ", act-order";
    return out;
  }
  out += " E4M3, ";
  switch (fp8_strategy) {
    case Fp8ScaleStrategy::kTensor: return out + "per-tensor scales";
    case Fp8ScaleStrategy::kChannel: return out + "per-channel scales";
    case Fp8ScaleStrategy::kBlock:
      return out + std::to_string(fp8_block_size[0]) + "x" + std::to_string(fp8_block_size[1]) +
             " block scales";
  }
  return out;
}

StatusOr<QuantizationConfig> quantization_config_from_hf_json(std::string_view text,
                                                              const std::string& path) {
  json root = json::parse(text.begin(), text.end(), nullptr, false);
  if (root.is_discarded() || !root.is_object()) {
    return invalid_argument(path + ": not a JSON object");
  }
  std::string key = "quantization_config";
  if (!root.contains(key) || root[key].is_null()) key = "compression_config";
  QuantizationConfig q;
  if (!root.contains(key) || root[key].is_null()) return q;
  const json& config = root[key];
  if (!config.is_object()) return invalid_argument(path + ": \"" + key + "\" must be an object");
  const JsonFields f(config, path, key + ".");
  PAGODA_ASSIGN_OR_RETURN(std::optional<std::string> method, f.optional_string("quant_method"));
  const std::string m = lower(method.value_or(""));
  if (m == "gptq") {
    q.method = QuantizationMethod::kGptq;
    PAGODA_RETURN_IF_ERROR(read_gptq(f, q));
  } else if (m == "awq") {
    q.method = QuantizationMethod::kAwq;
    PAGODA_RETURN_IF_ERROR(read_awq(f, q));
  } else if (m == "compressed-tensors" || (m.empty() && key == "compression_config")) {
    q.method = QuantizationMethod::kCompressedTensorsFp8;
    PAGODA_RETURN_IF_ERROR(read_compressed_tensors(f, path, q));
  } else if (m == "fp8") {
    q.method = QuantizationMethod::kFp8;
    PAGODA_RETURN_IF_ERROR(read_fp8(f, q));
  } else {
    return f.unsupported("quant_method", "\"" + method.value_or("") + "\"",
                         "gptq, awq, compressed-tensors (FP8) and fp8");
  }
  if (const json* scheme = f.find("kv_cache_scheme")) {
    PAGODA_RETURN_IF_ERROR(read_kv_cache_scheme(*scheme, path, key + ".", q));
  }
  return q;
}

}  // namespace pagoda
