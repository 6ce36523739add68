// What a request asks of output processing: the parts of vLLM's SamplingParams that act on text
// rather than on token ids (those live in RequestOptions, for the scheduler).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/reasoning_tags.h"
#include "pagoda/status.h"

namespace pagoda::engine {

/// Per-request text, stop-string and streaming settings.
struct OutputOptions {
  /// Generation ends when the text contains one of these; see StopStringMatcher.
  std::vector<std::string> stop;
  /// Keep the matched stop string (or the stop token's text) at the end of the output.
  bool include_stop_str_in_output = false;
  /// Leave special tokens (BOS, EOS, chat markers) out of the text.
  bool skip_special_tokens = true;
  /// Stop strings are not looked for in the text of the first min_tokens tokens (vLLM's rule:
  /// a match must end in text of token min_tokens + 1 or later; it may begin earlier).
  std::int64_t min_tokens = 0;
  /// Top alternatives to report per token; unset reports no logprobs at all.
  std::optional<std::int32_t> num_logprobs;
  /// True: an output after every step with new tokens (deltas). False: one final output.
  bool stream = false;
  /// The thinking span's tags (the engine's --reasoning-parser): the span is followed (for
  /// reasoning budgets, traces and usage); unset: the model does not think.
  std::optional<ReasoningTags> reasoning;
  /// Move the span's text out of `text` into RequestOutput::reasoning_text (chat's
  /// reasoning_content), tags dropped. False keeps the raw text, tags included (completions).
  bool separate_reasoning = false;
  /// The prompt ended inside an open span, so the output starts in it.
  bool reasoning_starts_inside = false;

  /// INVALID_ARGUMENT naming the field for bad stop strings, negative min_tokens or logprobs.
  Status validate() const;
};

}  // namespace pagoda::engine
