// Settings of speculative decoding (--speculative-config, PAGODA_SPECULATIVE_CONFIG, the YAML
// config's speculative_config), a JSON object with vLLM's key names:
//
//   {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2,
//    "prompt_lookup_max": 4}
//   {"method": "draft_model", "model": "draft.gguf", "num_speculative_tokens": 4}
//
// plus the adaptive policy's knobs (speculation_policy.h): disable_by_batch_size (vLLM's name),
// min_acceptance_rate and reprobe_interval (Pagoda's).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pagoda/status.h"

namespace pagoda::spec {

/// Where the proposed tokens come from.
enum class SpeculativeMethod : std::uint8_t {
  kNgram,       ///< Prompt lookup: the continuation of the last n-gram's earlier occurrence.
  kDraftModel,  ///< A small model with the same vocabulary, run autoregressively.
};

/// "ngram" or "draft_model".
std::string_view speculative_method_name(SpeculativeMethod method);

/// One validated speculative-decoding setup.
struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNgram;
  /// Most tokens proposed per request per step (k).
  std::int64_t num_speculative_tokens = 4;
  /// Shortest and longest suffix n-gram looked up in the request's tokens (ngram only).
  std::int64_t prompt_lookup_min = 2;
  std::int64_t prompt_lookup_max = 4;
  /// The draft model's path (draft_model only).
  std::string model;
  /// Speculation is off for a step while more than this many requests decode (CPU decode at
  /// a large batch is compute-bound: verifying k + 1 tokens costs k + 1 tokens' compute).
  std::int64_t disable_by_batch_size = 8;
  /// A request stops drafting while its acceptance-rate EMA is below this...
  double min_acceptance_rate = 0.25;
  /// ...and retries once every this many of its decode steps.
  std::int64_t reprobe_interval = 16;

  /// Most tokens the config accepts for num_speculative_tokens.
  static constexpr std::int64_t kMaxSpeculativeTokens = 16;

  /// INVALID_ARGUMENT naming the key and its allowed range.
  Status validate() const;
};

/// Parses and validates the JSON text of --speculative-config. INVALID_ARGUMENT for malformed
/// JSON, a non-object, an unknown key or method, a value of the wrong type or out of range.
StatusOr<SpeculativeConfig> parse_speculative_config(std::string_view json_text);

}  // namespace pagoda::spec
