// Constrained requests through the engine (EngineClient over the fake executor and the byte
// tokenizer): the mask reaches the sampler, the output follows the constraint and ends with
// "stop" on EOS, and an unconstrained request beside it is untouched.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "../engine/engine_test_support.h"
#include "structured_test_support.h"

namespace pagoda::engine {
namespace {

std::shared_ptr<const structured::CompiledConstraint> compile(structured::ConstraintSpec spec) {
  static auto compiler = structured::testing::byte_compiler();
  auto compiled = compiler->compile(spec);
  EXPECT_TRUE(compiled.ok()) << compiled.status().to_string();
  return compiled.ok() ? *compiled : nullptr;
}

std::string text_of(const std::vector<std::int32_t>& tokens) {
  std::string text;
  for (const std::int32_t t : tokens) {
    if (t < 256) text += static_cast<char>(t);
  }
  return text;
}

TEST(EngineConstraintTest, GreedyAndSampledOutputsFollowTheirConstraint) {
  Engine e = make_engine();
  const auto schema = compile({.kind = structured::ConstraintKind::kJsonSchema,
                               .text = R"({"type": "object", "properties": {
      "id": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]},
      "maxItems": 3}}, "required": ["id", "tags"]})"});
  for (const double temperature : {0.0, 1.0}) {
    for (int seed = 0; seed < 4; ++seed) {
      EngineRequest r = request(prompt_of(seed, 5), 200);
      r.sampling.temperature = temperature;
      r.sampling.seed = static_cast<std::uint64_t>(seed);
      r.constraint = schema;
      auto stream = e.client->submit(std::move(r));
      ASSERT_TRUE(stream.ok()) << stream.status().to_string();
      Collected c = collect(**stream);
      const auto& tokens = c.tokens[0];
      ASSERT_FALSE(tokens.empty());
      EXPECT_EQ(c.finals[0].output.status, RequestStatus::kFinishedStopped) << text_of(tokens);
      EXPECT_EQ(tokens.back(), kEos);
      const auto json = nlohmann::json::parse(text_of(tokens), nullptr, false);
      ASSERT_FALSE(json.is_discarded()) << text_of(tokens);
      // An integer of any size (nlohmann reads one past int64 as a double).
      EXPECT_TRUE(
          std::regex_search(text_of(tokens), std::regex(R"re("id": ?-?(0|[1-9][0-9]*)[,}])re")))
          << text_of(tokens);
      EXPECT_LE(json["tags"].size(), 3u) << json.dump();
    }
  }
  const EngineStats stats = settled_stats(*e.client);
  EXPECT_GT(stats.constraint_masks, 0);
}

TEST(EngineConstraintTest, AnUnconstrainedNeighbourIsUntouched) {
  // The same unconstrained request alone and beside a constrained one gets the same tokens.
  auto run = [](bool with_neighbour) {
    Engine e = make_engine();
    e.executor->hold(true);
    std::shared_ptr<OutputStream> neighbour;
    if (with_neighbour) {
      EngineRequest c = request(prompt_of(3, 6), 12);
      c.constraint = compile({.kind = structured::ConstraintKind::kRegex, .text = "[a-c]{12}"});
      neighbour = *e.client->submit(std::move(c));
    }
    auto plain = e.client->submit(request(prompt_of(7, 6), 12));
    e.executor->hold(false);
    EXPECT_TRUE(plain.ok());
    Collected out = collect(**plain);
    if (neighbour) {
      Collected n = collect(*neighbour);
      EXPECT_EQ(text_of(n.tokens[0]).find_first_not_of("abc"), std::string::npos)
          << text_of(n.tokens[0]);
    }
    return out.tokens[0];
  };
  EXPECT_EQ(run(false), run(true));
}

TEST(EngineConstraintTest, MaxTokensBeforeTheEndFinishesWithLength) {
  Engine e = make_engine();
  EngineRequest r = request(prompt_of(1, 4), 3);
  r.constraint = compile({.kind = structured::ConstraintKind::kRegex, .text = "[0-9]{10}"});
  auto stream = e.client->submit(std::move(r));
  ASSERT_TRUE(stream.ok());
  Collected c = collect(**stream);
  EXPECT_EQ(c.finals[0].output.status, RequestStatus::kFinishedLength);
  EXPECT_EQ(text_of(c.tokens[0]).size(), 3u);
  EXPECT_EQ(text_of(c.tokens[0]).find_first_not_of("0123456789"), std::string::npos);
  EXPECT_EQ(settled_stats(*e.client).kv_cache_usage, 0.0);
}

TEST(EngineConstraintTest, AConstraintWithoutAStopTokenIsRefused) {
  Engine e = make_engine();
  EngineRequest r = request(prompt_of(1, 4), 3);
  r.ignore_eos = true;
  r.constraint = compile({.kind = structured::ConstraintKind::kRegex, .text = "a"});
  auto stream = e.client->submit(std::move(r));
  ASSERT_TRUE(stream.ok());
  auto item = (*stream)->next(std::chrono::seconds(10));
  ASSERT_TRUE(item.ok());
  EXPECT_TRUE(item->output.finished);
  EXPECT_EQ(item->error.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(item->error.message().find("stop token"), std::string::npos);
}

TEST(EngineConstraintTest, AConstraintForAnotherVocabularyIsRefused) {
  Engine e = make_engine();
  auto other = std::make_unique<structured::ConstraintCompiler>(
      *structured::testing::byte_tokenizer(), 300, std::vector<std::int32_t>{kEos});
  auto compiled = other->compile({.kind = structured::ConstraintKind::kRegex, .text = "a"});
  ASSERT_TRUE(compiled.ok());
  EngineRequest r = request(prompt_of(1, 4), 3);
  r.constraint = *compiled;
  auto stream = e.client->submit(std::move(r));
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("compiled for 300"), std::string::npos);
}

TEST(EngineConstraintTest, AConstraintThatAllowsNoTokenEndsTheRequestWithAnError) {
  // {"$ref": "#"} compiles to a rule that only refers to itself: no output can ever match.
  Engine e = make_engine();
  EngineRequest r = request(prompt_of(2, 4), 8);
  r.constraint =
      compile({.kind = structured::ConstraintKind::kJsonSchema, .text = R"({"$ref": "#"})"});
  ASSERT_NE(r.constraint, nullptr);
  auto stream = e.client->submit(std::move(r));
  ASSERT_TRUE(stream.ok());
  Collected c = collect(**stream);
  ASSERT_TRUE(c.finals.contains(0));
  EXPECT_EQ(c.finals[0].error.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.finals[0].error.message().find("allows no next token"), std::string::npos)
      << c.finals[0].error.message();
  EXPECT_TRUE(c.tokens[0].empty());  // the token drawn through the empty mask is not kept
  EXPECT_EQ(settled_stats(*e.client).kv_cache_usage, 0.0);
}

TEST(EngineConstraintTest, UnconstrainedRequestsFillNoMasks) {
  Engine e = make_engine();
  auto stream = e.client->submit(request(prompt_of(4, 6), 6));
  ASSERT_TRUE(stream.ok());
  collect(**stream);
  EXPECT_EQ(settled_stats(*e.client).constraint_masks, 0);
}

}  // namespace
}  // namespace pagoda::engine
