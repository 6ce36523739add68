// libFuzzer target for structured outputs: a client's JSON schema, regex or EBNF grammar (the
// first byte picks which) through the limits and the grammar engine (xgrammar), over the default
// model's vocabulary. Any text must compile or be refused with INVALID_ARGUMENT, never crash; a
// compile that runs long is what libFuzzer's -timeout reports (a compile cannot be stopped, so
// one that runs on holds a compile worker). Walking a compiled constraint, every token its mask
// allows must be accepted. Built by scripts/fuzz.sh.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_models.h"
#include "structured/constraint_compiler.h"
#include "structured/constraint_matcher.h"
#include "structured/schema_rewrite.h"

namespace {

std::vector<std::int32_t> compiler_stops() {
  const auto eos = pagoda::fuzz::default_tokenizer()->eos_id();
  return eos ? std::vector<std::int32_t>{*eos} : std::vector<std::int32_t>{};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace pagoda;
  using structured::ConstraintKind;
  static structured::ConstraintCompiler* compiler = [] {
    const Tokenizer& tokenizer = *fuzz::default_tokenizer();
    structured::ConstraintLimits limits;
    limits.compile_timeout_seconds = 3600.0;  // slow compiles are libFuzzer's -timeout to find
    limits.cache_bytes = 0;                   // every input compiled afresh
    limits.max_running_compiles = 1;
    return new structured::ConstraintCompiler(tokenizer, tokenizer.vocab_size(), compiler_stops(),
                                              limits);
  }();
  if (size == 0) return 0;
  static constexpr ConstraintKind kKinds[] = {ConstraintKind::kJsonSchema, ConstraintKind::kRegex,
                                              ConstraintKind::kGrammar};
  structured::ConstraintSpec spec;
  spec.kind = kKinds[data[0] % 3];
  spec.text.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  if (spec.kind == ConstraintKind::kJsonSchema) (void)structured::rewrite_schema(spec.text);
  const structured::CompileResult result = compiler->compile(spec);
  if (!result.ok() && result.status().code() != StatusCode::kInvalidArgument) {
    std::fprintf(stderr, "unexpected: %s\n", result.status().to_string().c_str());
    std::abort();
  }
  if (!result.ok()) return 0;
  // A few tokens along: each step takes the allowed token the input's bytes point at.
  structured::ConstraintMatcher matcher(*result, compiler_stops());
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  for (std::size_t step = 0; step < 16 && !matcher.is_terminated(); ++step) {
    if (!matcher.fill_next_token_mask(mask)) break;
    std::vector<std::int32_t> allowed;
    for (std::size_t w = 0; w < mask.size(); ++w) {
      for (std::uint32_t bits = mask[w]; bits != 0; bits &= bits - 1) {
        allowed.push_back(static_cast<std::int32_t>(32 * w) + std::countr_zero(bits));
      }
    }
    if (allowed.empty()) std::abort();  // fill said some token is allowed
    const std::int32_t token = allowed[data[(step + 1) % size] % allowed.size()];
    if (!matcher.accept_token(token)) std::abort();
  }
  return 0;
}
