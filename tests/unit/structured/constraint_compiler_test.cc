#include "structured/constraint_compiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "structured/schema_rewrite.h"
#include "structured_test_support.h"

namespace pagoda::structured {
namespace {

using testing::accepts;
using testing::allowed;
using testing::byte_compiler;
using testing::kEos;

std::shared_ptr<const CompiledConstraint> compile_ok(ConstraintCompiler& compiler,
                                                     ConstraintSpec spec) {
  auto compiled = compiler.compile(spec);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return compiled.ok() ? *compiled : nullptr;
}

TEST(ConstraintCompilerTest, JsonSchemaAcceptsConformingObjectsOnly) {
  auto compiler = byte_compiler();
  const auto schema =
      compile_ok(*compiler, {.kind = ConstraintKind::kJsonSchema, .text = R"({"type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name", "age"], "additionalProperties": false})"});
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(accepts(schema, R"({"name": "Ada", "age": 36})"));
  EXPECT_FALSE(accepts(schema, R"({"name": "Ada"})"));             // age is required
  EXPECT_FALSE(accepts(schema, R"({"name": "Ada", "age": -1})"));  // minimum
  EXPECT_FALSE(accepts(schema, R"({"name": 7, "age": 1})"));
  EXPECT_FALSE(accepts(schema, R"([1, 2])"));
}

TEST(ConstraintCompilerTest, TheFirstMaskOfAJsonObjectAllowsOnlyTheBrace) {
  auto compiler = byte_compiler();
  const auto object = compile_ok(*compiler, {.kind = ConstraintKind::kJsonObject});
  ASSERT_NE(object, nullptr);
  ConstraintMatcher matcher(object, {kEos});
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  ASSERT_TRUE(matcher.fill_next_token_mask(mask));
  for (std::int32_t token = 0; token < testing::kVocab; ++token) {
    EXPECT_EQ(allowed(mask, token), token == '{') << "token " << token;
  }
  EXPECT_TRUE(accepts(object, R"({"any": [1, {"thing": null}]})"));
}

TEST(ConstraintCompilerTest, RegexChoiceAndGrammar) {
  auto compiler = byte_compiler();
  const auto regex = compile_ok(
      *compiler, {.kind = ConstraintKind::kRegex, .text = R"([a-z]+@[a-z]+\.(com|org))"});
  EXPECT_TRUE(accepts(regex, "ada@example.org"));
  EXPECT_FALSE(accepts(regex, "ada@example.net"));

  const auto choice = compile_ok(
      *compiler, {.kind = ConstraintKind::kChoice, .choices = {"yes", "no", "say \"maybe\"\n"}});
  EXPECT_TRUE(accepts(choice, "yes"));
  EXPECT_TRUE(accepts(choice, "say \"maybe\"\n"));  // quotes and control bytes escaped
  EXPECT_FALSE(accepts(choice, "ye"));
  EXPECT_FALSE(accepts(choice, "yesno"));

  const auto grammar = compile_ok(
      *compiler, {.kind = ConstraintKind::kGrammar, .text = R"g(root ::= "(" num ("+" num)* ")"
num ::= [0-9]+)g"});
  EXPECT_TRUE(accepts(grammar, "(1+22+333)"));
  EXPECT_FALSE(accepts(grammar, "(1+)"));
}

TEST(ConstraintCompilerTest, BadSpecsNameTheProblem) {
  auto compiler = byte_compiler();
  struct Case {
    ConstraintSpec spec;
    const char* expected;
  };
  const Case cases[] = {
      {{.kind = ConstraintKind::kJsonSchema, .text = "{not json"}, "not valid JSON"},
      {{.kind = ConstraintKind::kJsonSchema, .text = "[1, 2]"}, "must be an object"},
      {{.kind = ConstraintKind::kJsonSchema, .text = R"({"$ref": "#/$defs/missing"})"},
       "invalid json_schema"},
      {{.kind = ConstraintKind::kRegex, .text = "[0-9"}, "invalid regex"},
      {{.kind = ConstraintKind::kGrammar, .text = "root ::= undefined_rule"}, "invalid grammar"},
      {{.kind = ConstraintKind::kGrammar, .text = "start ::= \"a\""}, "invalid grammar"},
  };
  for (const Case& c : cases) {
    auto compiled = compiler->compile(c.spec);
    ASSERT_FALSE(compiled.ok()) << c.spec.text;
    EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(compiled.status().message().find(c.expected), std::string::npos)
        << compiled.status().message();
    // No source location of the grammar engine leaks into the message.
    EXPECT_EQ(compiled.status().message().find(".cc:"), std::string::npos)
        << compiled.status().message();
  }
}

TEST(ConstraintCompilerTest, CachesResultsAndErrorsPerSpec) {
  auto compiler = byte_compiler();
  const ConstraintSpec spec{.kind = ConstraintKind::kRegex, .text = "[0-9]{3}"};
  const auto first = compile_ok(*compiler, spec);
  const auto second = compile_ok(*compiler, spec);
  EXPECT_EQ(first.get(), second.get());
  const ConstraintSpec bad{.kind = ConstraintKind::kRegex, .text = "(("};
  EXPECT_FALSE(compiler->compile(bad).ok());
  EXPECT_FALSE(compiler->compile(bad).ok());
  const CompilerStats stats = compiler->stats();
  EXPECT_EQ(stats.compiles, 2);
  EXPECT_EQ(stats.cache_hits, 2);
  EXPECT_EQ(stats.cached, 2);
  EXPECT_GT(stats.cache_bytes, 0u);
  // A different spec of the same kind is a different entry.
  EXPECT_NE(compile_ok(*compiler, {.kind = ConstraintKind::kRegex, .text = "[0-9]{4}"}).get(),
            first.get());
}

TEST(ConstraintCompilerTest, TheCacheStaysWithinItsBytes) {
  ConstraintLimits limits;
  limits.cache_bytes = 1;  // nothing fits: every compile is fresh
  auto compiler = byte_compiler(limits);
  const ConstraintSpec spec{.kind = ConstraintKind::kRegex, .text = "[a-z]{2}"};
  compile_ok(*compiler, spec);
  compile_ok(*compiler, spec);
  EXPECT_EQ(compiler->stats().compiles, 2);
  EXPECT_EQ(compiler->stats().cache_bytes, 0u);
}

TEST(ConstraintCompilerTest, ACompileOverItsTimeIsRefused) {
  ConstraintLimits limits;
  limits.compile_timeout_seconds = 1e-9;
  auto compiler = byte_compiler(limits);
  auto compiled =
      compiler->compile({.kind = ConstraintKind::kJsonSchema,
                         .text = R"({"type": "object", "properties": {"a": {"type": "string"}}})"});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(compiled.status().message().find("longer than"), std::string::npos)
      << compiled.status().message();
  EXPECT_EQ(compiler->stats().finished(CompileOutcome::kTimeout), 1);
}

// A callback's result and the thread it came on.
struct Heard {
  std::promise<std::pair<CompileResult, std::thread::id>> promise;
  std::future<std::pair<CompileResult, std::thread::id>> future = promise.get_future();
  CompileCallback callback() {
    return [this](CompileResult result) {
      promise.set_value({std::move(result), std::this_thread::get_id()});
    };
  }
  bool arrived() { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
};

TEST(ConstraintCompilerTest, ANewSpecCompilesOffTheCallersThreadAndAHitAnswersAtOnce) {
  auto compiler = byte_compiler();
  const ConstraintSpec spec{.kind = ConstraintKind::kRegex, .text = "[a-f]{2,8}"};
  Heard first;
  CompileTicket ticket = compiler->compile_async(spec, first.callback());
  auto [result, thread] = first.future.get();
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_NE(thread, std::this_thread::get_id());
  EXPECT_TRUE(accepts(*result, "cafe"));

  Heard again;
  CompileTicket hit = compiler->compile_async(spec, again.callback());
  ASSERT_TRUE(again.arrived());  // before compile_async returned
  auto [cached, hit_thread] = again.future.get();
  EXPECT_EQ(hit_thread, std::this_thread::get_id());
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->get(), result->get());
}

// One worker and room for one queued spec, the worker held in a callback of the test's:
//   A running (callback blocked) | B queued | C refused at once | B cancelled | D queued, runs.
TEST(ConstraintCompilerTest, TheQueueIsBoundedAndACancelledQueuedCompileNeverRuns) {
  ConstraintLimits limits;
  limits.max_running_compiles = 1;
  limits.max_queued_compiles = 1;
  auto compiler = byte_compiler(limits);
  std::promise<void> in_callback;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  CompileTicket a = compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "a+"},
                                            [&in_callback, released](CompileResult) {
                                              in_callback.set_value();
                                              released.wait();
                                            });
  in_callback.get_future().wait();

  Heard b;
  CompileTicket b_ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "b+"}, b.callback());
  Heard c;
  CompileTicket c_ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "c+"}, c.callback());
  ASSERT_TRUE(c.arrived());
  EXPECT_EQ(c.future.get().first.status().code(), StatusCode::kUnavailable);
  b_ticket.cancel();
  EXPECT_EQ(compiler->stats().compiles_dropped, 1);

  Heard d;
  CompileTicket d_ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "d+"}, d.callback());
  EXPECT_FALSE(d.arrived());
  release.set_value();
  auto [d_result, d_thread] = d.future.get();
  ASSERT_TRUE(d_result.ok());
  EXPECT_TRUE(accepts(*d_result, "ddd"));
  EXPECT_FALSE(b.arrived());
  const CompilerStats stats = compiler->stats();
  EXPECT_EQ(stats.compiles, 2);  // A and D; B never ran
  EXPECT_EQ(stats.cached, 2);
}

TEST(ConstraintCompilerTest, AQueuedCompileWithoutAWorkerInTimeIsBusy) {
  ConstraintLimits limits;
  limits.max_running_compiles = 1;
  limits.compile_timeout_seconds = 0.2;
  auto compiler = byte_compiler(limits);
  std::promise<void> in_callback;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  CompileTicket a = compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "a+"},
                                            [&in_callback, released](CompileResult) {
                                              in_callback.set_value();
                                              released.wait();
                                            });
  in_callback.get_future().wait();
  Heard queued;
  const auto start = std::chrono::steady_clock::now();
  CompileTicket ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "q+"}, queued.callback());
  ASSERT_EQ(queued.future.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.19);
  EXPECT_EQ(queued.future.get().first.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(compiler->stats().finished(CompileOutcome::kQueueFull), 1);
  release.set_value();
  // The dropped compile never ran.
  EXPECT_EQ(compiler->stats().compiles, 1);
  EXPECT_EQ(compiler->stats().compiles_dropped, 1);
}

TEST(ConstraintCompilerTest, DestroyingTheCompilerAnswersItsWaiters) {
  ConstraintLimits limits;
  limits.max_running_compiles = 1;
  auto compiler = byte_compiler(limits);
  std::promise<void> in_callback;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  CompileTicket a = compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "a+"},
                                            [&in_callback, released](CompileResult) {
                                              in_callback.set_value();
                                              released.wait();
                                            });
  in_callback.get_future().wait();
  Heard queued;
  CompileTicket ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "q+"}, queued.callback());
  compiler.reset();
  ASSERT_TRUE(queued.arrived());
  EXPECT_EQ(queued.future.get().first.status().code(), StatusCode::kUnavailable);
  release.set_value();
}

// Each compile_async call is one cache query; each one the cache does not answer starts one wait
// that finishes under exactly one outcome. One worker, one queue place:
//   ok (new) | hit | invalid (grammar, compiled) | invalid (limit, never compiled)
//   A holds the worker (ok) | B queued | C queue_full | B cancelled (dropped, never compiled)
TEST(ConstraintCompilerTest, StatsCountEveryWaitOnceUnderItsOutcome) {
  ConstraintLimits limits;
  limits.max_running_compiles = 1;
  limits.max_queued_compiles = 1;
  auto compiler = byte_compiler(limits);
  const auto finished = [&](CompileOutcome outcome) { return compiler->stats().finished(outcome); };
  const ConstraintSpec digits{.kind = ConstraintKind::kRegex, .text = "[0-9]{3}"};
  ASSERT_TRUE(compiler->compile(digits).ok());
  ASSERT_TRUE(compiler->compile(digits).ok());
  ASSERT_FALSE(compiler->compile({.kind = ConstraintKind::kRegex, .text = "(("}).ok());
  ASSERT_FALSE(compiler->compile({.kind = ConstraintKind::kRegex, .text = "a{5000}"}).ok());
  CompilerStats stats = compiler->stats();
  EXPECT_EQ(stats.cache_queries, 4);
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.waits_started, 3);
  EXPECT_EQ(stats.finished(CompileOutcome::kOk), 1);
  EXPECT_EQ(stats.finished(CompileOutcome::kInvalid), 2);
  EXPECT_EQ(stats.compiles, 2);  // the limit was refused before any compile
  EXPECT_EQ(stats.compiles_finished, 2);

  std::promise<void> in_callback;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  CompileTicket a = compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "a+"},
                                            [&in_callback, released](CompileResult) {
                                              in_callback.set_value();
                                              released.wait();
                                            });
  in_callback.get_future().wait();
  EXPECT_EQ(finished(CompileOutcome::kOk), 2);
  EXPECT_EQ(compiler->stats().running, 1);  // busy until its callbacks return
  Heard b;
  CompileTicket b_ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "b+"}, b.callback());
  EXPECT_EQ(compiler->stats().queued, 1);
  Heard c;
  CompileTicket c_ticket =
      compiler->compile_async({.kind = ConstraintKind::kRegex, .text = "c+"}, c.callback());
  ASSERT_TRUE(c.arrived());
  EXPECT_EQ(finished(CompileOutcome::kQueueFull), 1);
  b_ticket.cancel();
  b_ticket.cancel();  // once only
  EXPECT_EQ(finished(CompileOutcome::kCancelled), 1);
  release.set_value();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (compiler->stats().running > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  stats = compiler->stats();
  EXPECT_EQ(stats.cache_queries, 7);
  EXPECT_EQ(stats.cache_hits, 1);
  EXPECT_EQ(stats.waits_started, 6);
  std::int64_t ended = 0;
  for (const std::int64_t n : stats.waits_finished) ended += n;
  EXPECT_EQ(ended, stats.waits_started) << "nobody waits now";
  EXPECT_EQ(stats.finished(CompileOutcome::kTimeout), 0);
  EXPECT_EQ(stats.finished(CompileOutcome::kShutdown), 0);
  EXPECT_EQ(stats.compiles, 3);  // digits, "((", A; B was dropped from the queue
  EXPECT_EQ(stats.compiles_dropped, 1);
  EXPECT_EQ(stats.compiles_finished, 3);
  std::int64_t in_buckets = 0;
  for (const std::int64_t n : stats.compile_time_buckets) in_buckets += n;
  EXPECT_EQ(in_buckets, 3);
  EXPECT_GT(stats.compile_seconds, 0.0);
  EXPECT_EQ(stats.queued, 0);
  EXPECT_EQ(stats.running, 0);
}

TEST(ConstraintMatcherTest, RollbackUndoesAcceptedTokens) {
  auto compiler = byte_compiler();
  const auto regex = compile_ok(*compiler, {.kind = ConstraintKind::kRegex, .text = "ab|ac"});
  ConstraintMatcher matcher(regex, {kEos});
  ASSERT_TRUE(testing::walk(matcher, "ab"));
  EXPECT_FALSE(matcher.accept_token('c'));  // refused, and no change
  EXPECT_TRUE(matcher.is_completed());
  matcher.rollback(1);
  EXPECT_FALSE(matcher.is_completed());
  EXPECT_TRUE(matcher.accept_token('c'));
  EXPECT_TRUE(matcher.accept_token(kEos));
  EXPECT_TRUE(matcher.is_terminated());
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  EXPECT_FALSE(matcher.fill_next_token_mask(mask));  // nothing after the end
}

TEST(ConstraintMatcherTest, SpecialTokensOtherThanStopsAreNeverAllowed) {
  auto compiler = byte_compiler();
  const auto object = compile_ok(*compiler, {.kind = ConstraintKind::kJsonObject});
  ConstraintMatcher matcher(object, {kEos});
  ASSERT_TRUE(testing::walk(matcher, "{}"));
  std::vector<std::uint32_t> mask(static_cast<std::size_t>(matcher.mask_words()));
  ASSERT_TRUE(matcher.fill_next_token_mask(mask));
  EXPECT_TRUE(allowed(mask, kEos));
  EXPECT_FALSE(allowed(mask, engine::kImStart));
  EXPECT_FALSE(allowed(mask, ' '));  // compact JSON: no trailing whitespace
}

}  // namespace
}  // namespace pagoda::structured

namespace pagoda::structured {
namespace {

TEST(SchemaRewriteTest, Ipv4OctetsHaveNoLeadingZeros) {
  auto compiler = testing::byte_compiler();
  auto ip = compiler->compile(
      {.kind = ConstraintKind::kJsonSchema, .text = R"({"type": "string", "format": "ipv4"})"});
  ASSERT_TRUE(ip.ok()) << ip.status().to_string();
  EXPECT_TRUE(testing::accepts(*ip, R"("10.0.255.1")"));
  EXPECT_FALSE(testing::accepts(*ip, R"("10.00.255.1")"));
  EXPECT_FALSE(testing::accepts(*ip, R"("10.0.256.1")"));
  // A pattern given beside it is the client's.
  EXPECT_EQ(rewrite_schema(R"({"format": "ipv4", "pattern": "^1$"})"),
            R"({"format": "ipv4", "pattern": "^1$"})");
}

TEST(SchemaRewriteTest, StringLengthsBecomeAPatternWithTheSameBounds) {
  auto compiler = testing::byte_compiler();
  auto bounded = compiler->compile(
      {.kind = ConstraintKind::kJsonSchema, .text = R"({"type": "object", "properties": {"s": {
      "type": "string", "minLength": 2, "maxLength": 4}}, "required": ["s"]})"});
  ASSERT_TRUE(bounded.ok()) << bounded.status().to_string();
  EXPECT_FALSE(testing::accepts(*bounded, R"({"s": "a"})"));
  EXPECT_TRUE(testing::accepts(*bounded, R"({"s": "ab"})"));
  EXPECT_TRUE(testing::accepts(*bounded, R"({"s": "abcd"})"));
  EXPECT_FALSE(testing::accepts(*bounded, R"({"s": "abcde"})"));
  EXPECT_FALSE(testing::accepts(*bounded, R"({"s": "a\"b"})"));  // no escapes
  // Left alone: a pattern, a format or an enum already says what the string is; not a string.
  for (const char* kept : {R"({"type": "string", "maxLength": 3, "pattern": "^a+$"})",
                           R"({"type": "string", "maxLength": 3, "format": "date"})",
                           R"({"type": "string", "maxLength": 3, "enum": ["ab"]})",
                           R"({"type": "array", "maxLength": 3})",
                           R"({"type": "string", "minLength": 5, "maxLength": 3})"}) {
    EXPECT_EQ(rewrite_schema(kept), kept);
  }
  EXPECT_EQ(rewrite_schema(R"({"type": "string", "maxLength": 3})"),
            R"({"type":"string","pattern":"^[^\"\\\\\\x00-\\x1f]{0,3}$"})");
}

}  // namespace
}  // namespace pagoda::structured

namespace pagoda::structured {
namespace {

using Json = nlohmann::json;

TEST(SchemaRewriteTest, OnlyTheFirst256PatternStatesAreRewritten) {
  // 100 + 101 states fit; the third string's 102 would pass 256: it keeps its maxLength.
  const std::string schema = R"({"type": "object", "properties": {)"
                             R"("a": {"type": "string", "maxLength": 99}, )"
                             R"("b": {"type": "string", "maxLength": 100}, )"
                             R"("c": {"type": "string", "maxLength": 101}}})";
  const Json rewritten = Json::parse(rewrite_schema(schema));
  EXPECT_TRUE(rewritten["properties"]["a"].contains("pattern"));
  EXPECT_TRUE(rewritten["properties"]["b"].contains("pattern"));
  EXPECT_FALSE(rewritten["properties"]["c"].contains("pattern"));
  EXPECT_EQ(rewritten["properties"]["c"]["maxLength"], 101);
}

}  // namespace
}  // namespace pagoda::structured
