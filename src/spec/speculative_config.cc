#include "spec/speculative_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace pagoda::spec {
namespace {

constexpr std::string_view kPrefix = "--speculative-config: ";

Status bad(const std::string& message) {
  return invalid_argument(std::string(kPrefix) + message);
}

Status read_int(const nlohmann::json& value, const std::string& key, std::int64_t& out) {
  if (!value.is_number_integer()) return bad("\"" + key + "\" must be an integer");
  out = value.get<std::int64_t>();
  return Status::ok_status();
}

}  // namespace

std::string_view speculative_method_name(SpeculativeMethod method) {
  return method == SpeculativeMethod::kNgram ? "ngram" : "draft_model";
}

Status SpeculativeConfig::validate() const {
  if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens) {
    return bad("\"num_speculative_tokens\" is " + std::to_string(num_speculative_tokens) +
               "; it must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "]");
  }
  if (method == SpeculativeMethod::kNgram) {
    if (prompt_lookup_min < 1) {
      return bad("\"prompt_lookup_min\" is " + std::to_string(prompt_lookup_min) +
                 "; it must be at least 1");
    }
    if (prompt_lookup_max < prompt_lookup_min) {
      return bad("\"prompt_lookup_max\" (" + std::to_string(prompt_lookup_max) +
                 ") must be at least \"prompt_lookup_min\" (" + std::to_string(prompt_lookup_min) +
                 ")");
    }
    if (!model.empty()) return bad("\"model\" is only for method \"draft_model\"");
  } else if (model.empty()) {
    return bad("method \"draft_model\" needs \"model\": the draft model's path");
  }
  if (disable_by_batch_size < 1) {
    return bad("\"disable_by_batch_size\" is " + std::to_string(disable_by_batch_size) +
               "; it must be at least 1");
  }
  if (!(min_acceptance_rate >= 0.0 && min_acceptance_rate <= 1.0)) {
    return bad("\"min_acceptance_rate\" must be in [0, 1]");
  }
  if (reprobe_interval < 1) {
    return bad("\"reprobe_interval\" is " + std::to_string(reprobe_interval) +
               "; it must be at least 1");
  }
  return Status::ok_status();
}

StatusOr<SpeculativeConfig> parse_speculative_config(std::string_view json_text) {
  const nlohmann::json json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    return bad(
        "not valid JSON; expected e.g. "
        "'{\"method\":\"ngram\",\"num_speculative_tokens\":4}'");
  }
  if (!json.is_object()) return bad("expected a JSON object");
  SpeculativeConfig config;
  bool has_method = false;
  bool has_lookup_max = false;
  for (const auto& [key, value] : json.items()) {
    if (key == "method") {
      if (!value.is_string()) return bad("\"method\" must be a string");
      const auto method = value.get<std::string>();
      if (method == "ngram") {
        config.method = SpeculativeMethod::kNgram;
      } else if (method == "draft_model") {
        config.method = SpeculativeMethod::kDraftModel;
      } else {
        return bad("unknown method \"" + method + "\"; use \"ngram\" or \"draft_model\"");
      }
      has_method = true;
    } else if (key == "model") {
      if (!value.is_string()) return bad("\"model\" must be a string (a path)");
      config.model = value.get<std::string>();
    } else if (key == "num_speculative_tokens") {
      PAGODA_RETURN_IF_ERROR(read_int(value, key, config.num_speculative_tokens));
    } else if (key == "prompt_lookup_min") {
      PAGODA_RETURN_IF_ERROR(read_int(value, key, config.prompt_lookup_min));
    } else if (key == "prompt_lookup_max") {
      PAGODA_RETURN_IF_ERROR(read_int(value, key, config.prompt_lookup_max));
      has_lookup_max = true;
    } else if (key == "disable_by_batch_size") {
      PAGODA_RETURN_IF_ERROR(read_int(value, key, config.disable_by_batch_size));
    } else if (key == "reprobe_interval") {
      PAGODA_RETURN_IF_ERROR(read_int(value, key, config.reprobe_interval));
    } else if (key == "min_acceptance_rate") {
      if (!value.is_number()) return bad("\"min_acceptance_rate\" must be a number");
      config.min_acceptance_rate = value.get<double>();
    } else {
      return bad("unknown key \"" + key +
                 "\"; known: method, model, num_speculative_tokens, prompt_lookup_min, "
                 "prompt_lookup_max, disable_by_batch_size, min_acceptance_rate, "
                 "reprobe_interval");
    }
  }
  if (!has_method) return bad("\"method\" is required (\"ngram\" or \"draft_model\")");
  // A lone prompt_lookup_min above the default maximum raises the maximum with it.
  if (!has_lookup_max && json.contains("prompt_lookup_min")) {
    config.prompt_lookup_max = std::max(config.prompt_lookup_max, config.prompt_lookup_min);
  }
  PAGODA_RETURN_IF_ERROR(config.validate());
  return config;
}

}  // namespace pagoda::spec
