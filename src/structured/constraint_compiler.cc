#include "structured/constraint_compiler.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "structured/schema_rewrite.h"
#include "structured/xgrammar_handles.h"

namespace pagoda::structured {

namespace {

using Clock = std::chrono::steady_clock;
using Result = StatusOr<std::shared_ptr<const CompiledConstraint>>;

// An EBNF string literal for `text`: quotes, backslashes and control bytes escaped.
std::string ebnf_literal(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The first line of an xgrammar error, without its "[time] file.cc:line: " prefix.
std::string grammar_error(const ConstraintSpec& spec, const std::exception& e) {
  std::string message = e.what();
  if (const std::size_t eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
  if (const std::size_t at = message.find(".cc:"); at != std::string::npos) {
    if (const std::size_t colon = message.find(": ", at); colon != std::string::npos) {
      message.erase(0, colon + 2);
    }
  }
  if (message.size() > 400) message = message.substr(0, 400) + "...";
  return "invalid " + std::string(constraint_kind_name(spec.kind)) + ": " + message;
}

}  // namespace

struct ConstraintCompiler::State {
  // One compile, awaited by every request for the same spec that arrives meanwhile.
  struct Pending {
    bool done = false;
    std::optional<Result> result;
  };
  struct Entry {
    Result result;
    std::size_t bytes = 0;
    std::list<std::string>::iterator lru;
  };

  State(const Tokenizer& tokenizer, std::int64_t vocab_size, std::vector<std::int32_t> stop_ids,
        ConstraintLimits l)
      : limits(l),
        vocabulary(std::make_shared<TokenVocabulary>(tokenizer, vocab_size, std::move(stop_ids))),
        // xgrammar's own cache keeps the token masks of rules it has compiled before (strings,
        // numbers, formats...), so a new schema made of familiar parts compiles in a fraction of
        // the time; it shares cache_bytes with the compiled grammars (a third for the rules).
        compiler(vocabulary->impl().info, std::max(1, l.compile_threads),
                 /*cache_enabled=*/true, static_cast<std::int64_t>(l.cache_bytes)) {}

  // Runs on its own thread: the grammar engine has no way to stop a compile midway.
  Result run(const ConstraintSpec& spec) {
    try {
      xgrammar::CompiledGrammar grammar = [&] {
        switch (spec.kind) {
          case ConstraintKind::kJsonObject:
            return compiler.CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false);
          case ConstraintKind::kJsonSchema:
            // Compact separators (", " and ": "), no free whitespace: a small model cannot loop
            // on blank lines, and every output is still valid JSON for the schema.
            return compiler.CompileJSONSchema(rewrite_schema(spec.text),
                                              /*any_whitespace=*/false, std::nullopt, std::nullopt,
                                              /*strict_mode=*/true);
          case ConstraintKind::kRegex: return compiler.CompileRegex(spec.text);
          case ConstraintKind::kChoice: {
            std::string ebnf = "root ::= ";
            for (std::size_t i = 0; i < spec.choices.size(); ++i) {
              ebnf += (i > 0 ? " | " : "") + ebnf_literal(spec.choices[i]);
            }
            return compiler.CompileGrammar(ebnf, "root");
          }
          case ConstraintKind::kGrammar: return compiler.CompileGrammar(spec.text, "root");
        }
        throw std::logic_error("unknown constraint kind");
      }();
      auto compiled = std::make_shared<const CompiledConstraint>(
          spec.kind, std::make_unique<CompiledConstraint::Impl>(
                         CompiledConstraint::Impl{std::move(grammar), vocabulary}));
      if (compiled->memory_bytes() > limits.max_compiled_bytes) {
        return invalid_argument("the " + std::string(constraint_kind_name(spec.kind)) +
                                " compiles to " + std::to_string(compiled->memory_bytes()) +
                                " bytes; at most " + std::to_string(limits.max_compiled_bytes) +
                                " are supported");
      }
      return std::shared_ptr<const CompiledConstraint>(std::move(compiled));
    } catch (const std::exception& e) {
      return invalid_argument(grammar_error(spec, e));
    }
  }

  // Caches `result` under `key` and evicts the least recently used beyond cache_bytes. Errors
  // are cached too (a hostile spec sent again costs a lookup), counted at a nominal size.
  void store(const std::string& key, const Result& result) {
    const std::size_t bytes = key.size() + (result.ok() ? (*result)->memory_bytes() : 256);
    if (bytes > limits.cache_bytes) return;
    if (const auto old = cache.find(key); old != cache.end()) {
      cache_bytes -= old->second.bytes;
      lru.erase(old->second.lru);
      cache.erase(old);
    }
    lru.push_front(key);
    cache_bytes += bytes;
    cache.emplace(key, Entry{result, bytes, lru.begin()});
    while (cache_bytes > limits.cache_bytes && !lru.empty()) {
      const auto it = cache.find(lru.back());
      cache_bytes -= it->second.bytes;
      cache.erase(it);
      lru.pop_back();
    }
  }

  const ConstraintLimits limits;
  const std::shared_ptr<const TokenVocabulary> vocabulary;
  xgrammar::GrammarCompiler compiler;

  std::mutex mutex;  // guards everything below
  std::condition_variable changed;
  std::unordered_map<std::string, Entry> cache;
  std::list<std::string> lru;  // most recent first
  std::size_t cache_bytes = 0;
  std::unordered_map<std::string, std::shared_ptr<Pending>> pending;
  int running = 0;
  CompilerStats stats;
};

ConstraintCompiler::ConstraintCompiler(const Tokenizer& tokenizer, std::int64_t vocab_size,
                                       std::vector<std::int32_t> stop_token_ids,
                                       ConstraintLimits limits)
    : state_(std::make_shared<State>(tokenizer, vocab_size, std::move(stop_token_ids), limits)) {}

ConstraintCompiler::~ConstraintCompiler() = default;

const ConstraintLimits& ConstraintCompiler::limits() const {
  return state_->limits;
}

const TokenVocabulary& ConstraintCompiler::vocabulary() const {
  return *state_->vocabulary;
}

CompilerStats ConstraintCompiler::stats() const {
  std::lock_guard lock(state_->mutex);
  CompilerStats s = state_->stats;
  s.cache_bytes = state_->cache_bytes;
  s.cached = static_cast<std::int64_t>(state_->cache.size());
  return s;
}

StatusOr<std::shared_ptr<const CompiledConstraint>> ConstraintCompiler::compile(
    const ConstraintSpec& spec) {
  State& s = *state_;
  const std::string key = spec.cache_key();
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(s.limits.compile_timeout_seconds));
  std::unique_lock lock(s.mutex);
  if (const auto it = s.cache.find(key); it != s.cache.end()) {
    s.lru.splice(s.lru.begin(), s.lru, it->second.lru);
    ++s.stats.cache_hits;
    return it->second.result;
  }
  std::shared_ptr<State::Pending> pending;
  if (const auto it = s.pending.find(key); it != s.pending.end()) {
    pending = it->second;
  } else {
    if (Status limit = check_constraint_limits(spec, s.limits); !limit.ok()) {
      ++s.stats.failed;
      s.store(key, limit);
      return limit;
    }
    if (!s.changed.wait_until(lock, deadline,
                              [&] { return s.running < s.limits.max_running_compiles; })) {
      ++s.stats.failed;
      return Status(StatusCode::kUnavailable,
                    "too many structured-output constraints are compiling; retry shortly");
    }
    pending = std::make_shared<State::Pending>();
    s.pending[key] = pending;
    ++s.running;
    ++s.stats.compiles;
    std::thread([state = state_, pending, spec, key] {
      const Clock::time_point start = Clock::now();
      Result result = state->run(spec);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      std::lock_guard done_lock(state->mutex);
      state->stats.compile_seconds += seconds;
      if (!result.ok()) ++state->stats.failed;
      state->store(key, result);
      state->pending.erase(key);
      --state->running;
      pending->result = std::move(result);
      pending->done = true;
      state->changed.notify_all();
    }).detach();
  }
  if (!s.changed.wait_until(lock, deadline, [&] { return pending->done; })) {
    ++s.stats.timeouts;
    return invalid_argument("the " + std::string(constraint_kind_name(spec.kind)) +
                            " took longer than " +
                            std::to_string(static_cast<int>(s.limits.compile_timeout_seconds)) +
                            " s to compile; simplify it");
  }
  return *pending->result;
}

}  // namespace pagoda::structured
