#include "tokenizer/gguf_pre_tokenizers.h"

#include <string_view>

namespace pagoda {
namespace {

constexpr std::string_view kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt4oSplit =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// How a family splits before the byte mapping.
enum class Family { kGpt2, kDigitsThenGpt2, kLlama3, kQwen2, kGpt4o };

struct Entry {
  std::string_view pre;
  Family family;
};

constexpr Entry kTable[] = {
    {"default", Family::kGpt2},
    {"gpt-2", Family::kGpt2},
    {"gpt2", Family::kGpt2},
    {"phi-2", Family::kGpt2},
    {"smollm", Family::kDigitsThenGpt2},
    {"starcoder", Family::kDigitsThenGpt2},
    {"refact", Family::kDigitsThenGpt2},
    {"llama3", Family::kLlama3},
    {"llama-v3", Family::kLlama3},
    {"llama-bpe", Family::kLlama3},
    {"smaug-bpe", Family::kLlama3},
    {"falcon3", Family::kLlama3},
    {"qwen2", Family::kQwen2},
    {"deepseek-r1-qwen", Family::kQwen2},
    {"megrez", Family::kQwen2},
    {"gpt-4o", Family::kGpt4o},
    {"llama4", Family::kGpt4o},
};

StatusOr<PreTokenizerStep> split_step(std::string_view pattern) {
  PreTokenizerStep step;
  PAGODA_ASSIGN_OR_RETURN(step.regex, UnicodeRegex::compile(std::string(pattern)));
  return step;
}

StatusOr<PreTokenizerStep> byte_level_step(bool use_regex) {
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kByteLevel;
  if (use_regex) {
    PAGODA_ASSIGN_OR_RETURN(step.regex, UnicodeRegex::compile(std::string(kGpt2SplitRegex)));
  }
  return step;
}

}  // namespace

StatusOr<GgufPreTokenizer> gguf_pre_tokenizer(const std::string& pre, const std::string& source) {
  const Entry* entry = nullptr;
  std::string known;
  for (const Entry& e : kTable) {
    if (e.pre == pre) entry = &e;
    known += (known.empty() ? "" : ", ") + std::string(e.pre);
  }
  if (entry == nullptr) {
    return unimplemented(source + ": tokenizer.ggml.pre \"" + pre +
                         "\" is not supported (supported: " + known +
                         "); load the model's tokenizer.json instead");
  }
  GgufPreTokenizer out;
  std::string_view split;
  switch (entry->family) {
    case Family::kGpt2: break;
    case Family::kDigitsThenGpt2: split = R"(\p{N})"; break;
    case Family::kLlama3:
      split = kLlama3Split;
      out.ignore_merges = true;
      break;
    case Family::kQwen2: split = kQwen2Split; break;
    case Family::kGpt4o: split = kGpt4oSplit; break;
  }
  if (!split.empty()) {
    PAGODA_ASSIGN_OR_RETURN(auto step, split_step(split));
    out.steps.push_back(std::move(step));
  }
  // GPT-2's own regex runs inside ByteLevel only where no family regex replaced it.
  const bool use_gpt2_regex =
      entry->family == Family::kGpt2 || entry->family == Family::kDigitsThenGpt2;
  PAGODA_ASSIGN_OR_RETURN(auto byte_level, byte_level_step(use_gpt2_regex));
  out.steps.push_back(std::move(byte_level));
  return out;
}

}  // namespace pagoda
