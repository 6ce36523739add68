// OutputProcessor: streamed text equals decode() of all ids, stop strings end requests (and ask
// the engine to abort them in the scheduler), finish reasons, usage, timings on a fake clock,
// exactly one final output per request, and requests by slot (a released slot's next request
// starts clean). A tiny byte-level tokenizer (one id per byte) gives full control over token
// boundaries; output_processor_smollm2_test.cc checks real text.
#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "byte_tokenizer_for_test.h"
#include "tokenizer/utf8.h"

namespace pagoda::engine {
namespace {

class OutputProcessorTest : public ::testing::Test {
 protected:
  static constexpr std::int64_t kPromptTokens = 5;
  static constexpr std::int64_t kCachedTokens = 2;

  // Registers `id` at the next unused slot, as the engine does at admission.
  void add(const std::string& id, OutputOptions options, double arrival = 0.0) {
    add_at(static_cast<std::int32_t>(ids_.size()), id, std::move(options), arrival);
  }
  void add_at(std::int32_t slot, const std::string& id, OutputOptions options,
              double arrival = 0.0) {
    ASSERT_TRUE(processor_.add_request(slot, id, std::move(options), kPromptTokens, arrival).ok());
    slot_of_[id] = slot;
    if (static_cast<std::size_t>(slot) >= ids_.size()) ids_.resize(slot + 1);
    ids_[static_cast<std::size_t>(slot)] = id;
  }
  std::int32_t slot(const std::string& id) const { return slot_of_.at(id); }

  // One step's update for `id`, as the scheduler makes it.
  RequestUpdate update(const std::string& id, std::vector<std::int32_t> ids,
                       RequestStatus status = RequestStatus::kRunning) {
    RequestUpdate u;
    u.request_id = id;
    u.slot = slot(id);
    num_output_[id] += static_cast<std::int64_t>(ids.size());
    u.new_token_ids = std::move(ids);
    u.status = status;
    if (status == RequestStatus::kFinishedStopped) u.stop_token_id = u.new_token_ids.back();
    u.num_prompt_tokens = kPromptTokens;
    u.num_cached_prompt_tokens = kCachedTokens;
    u.num_output_tokens = num_output_[id];
    return u;
  }

  // Runs one update per step; collects every output of `id` in order.
  std::vector<RequestOutput> run(const std::vector<RequestUpdate>& updates, double now = 1.0) {
    std::vector<RequestOutput> outputs;
    for (const RequestUpdate& u : updates) {
      ProcessedOutputs step = processor_.process(std::vector<RequestUpdate>{u}, now);
      for (const std::int32_t s : step.requests_to_abort) {
        aborts_.push_back(ids_[static_cast<std::size_t>(s)]);
      }
      EXPECT_EQ(step.output_slots.size(), step.outputs.size());
      for (std::size_t i = 0; i < step.outputs.size(); ++i) {
        EXPECT_EQ(step.output_slots[i], u.slot);
        outputs.push_back(std::move(step.outputs[i]));
      }
      if (!processor_.has_request(u.slot)) break;
    }
    return outputs;
  }

  // One update per byte of `text`; the last one carries `last_status`.
  std::vector<RequestUpdate> per_byte(const std::string& id, std::string_view text,
                                      RequestStatus last_status = RequestStatus::kFinishedLength) {
    std::vector<RequestUpdate> updates;
    const std::vector<std::int32_t> ids = bytes_of(text);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      updates.push_back(
          update(id, {ids[i]}, i + 1 == ids.size() ? last_status : RequestStatus::kRunning));
    }
    return updates;
  }

  static std::string joined(const std::vector<RequestOutput>& outputs) {
    std::string text;
    for (const RequestOutput& o : outputs) text += o.text;
    return text;
  }

  static OutputOptions streaming(std::vector<std::string> stop = {}) {
    OutputOptions options;
    options.stream = true;
    options.stop = std::move(stop);
    return options;
  }

  std::unique_ptr<Tokenizer> tokenizer_ = make_byte_tokenizer();
  OutputProcessor processor_{*tokenizer_};
  std::map<std::string, std::int64_t> num_output_;
  std::map<std::string, std::int32_t> slot_of_;
  std::vector<std::string> ids_;  // by slot: the latest request added there
  std::vector<std::string> aborts_;
};

TEST_F(OutputProcessorTest, SplitMultiByteCharactersAreNeverEmittedHalfWay) {
  add("r", streaming());
  const std::string text = "héllo wörld 日本 🎉";
  const std::vector<RequestOutput> outputs = run(per_byte("r", text));
  ASSERT_EQ(outputs.size(), bytes_of(text).size());
  for (const RequestOutput& o : outputs) EXPECT_TRUE(is_valid_utf8(o.text)) << o.text;
  EXPECT_EQ(joined(outputs), tokenizer_->decode(bytes_of(text)));
  EXPECT_EQ(joined(outputs), text);
  EXPECT_TRUE(outputs.back().finished);
  EXPECT_EQ(outputs.back().finish_reason(), "length");
}

TEST_F(OutputProcessorTest, StopStringAcrossTokensIsHeldBackAndCut) {
  add("r", streaming({"wor"}));
  const std::vector<RequestOutput> outputs = run(per_byte("r", "hello world"));
  ASSERT_FALSE(outputs.empty());
  EXPECT_EQ(joined(outputs), "hello ");
  for (const RequestOutput& o : outputs) EXPECT_EQ(o.text.find('w'), std::string::npos);
  const RequestOutput& last = outputs.back();
  EXPECT_TRUE(last.finished);
  EXPECT_EQ(last.finish_reason(), "stop");
  EXPECT_EQ(last.stop_string, "wor");
  EXPECT_EQ(last.stop_token_id, std::nullopt);
  EXPECT_EQ(last.usage.num_completion_tokens, 9);  // "hello wor": the tokens generated
  // The scheduler still runs it: the engine must abort it there.
  EXPECT_EQ(aborts_, std::vector<std::string>{"r"});
  EXPECT_FALSE(processor_.has_request(slot("r")));
}

TEST_F(OutputProcessorTest, HeldBackTextIsReleasedAtTheEnd) {
  add("r", streaming({"xyz"}));
  const std::vector<RequestOutput> outputs = run(per_byte("r", "abc xy"));
  EXPECT_EQ(outputs.back().text, "xy");
  EXPECT_EQ(joined(outputs), "abc xy");
  EXPECT_EQ(outputs.back().finish_reason(), "length");
  EXPECT_EQ(outputs.back().stop_string, std::nullopt);
  EXPECT_TRUE(aborts_.empty());
}

TEST_F(OutputProcessorTest, IncludeStopStringInOutput) {
  OutputOptions options = streaming({"END"});
  options.include_stop_str_in_output = true;
  add("r", options);
  EXPECT_EQ(joined(run({update("r", bytes_of("foo E")), update("r", bytes_of("ND bar"))})),
            "foo END");
}

TEST_F(OutputProcessorTest, MultipleStopsEarliestEndingWins) {
  add("r", streaming({"abc", "ab", "zz"}));
  const std::vector<RequestOutput> outputs =
      run({update("r", bytes_of("xab")), update("r", bytes_of("c"))});
  EXPECT_EQ(joined(outputs), "x");
  EXPECT_EQ(outputs.back().stop_string, "ab");
}

TEST_F(OutputProcessorTest, StopInsideMultiByteCharacters) {
  add("r", streaming({"é"}));
  // "caf" then the two bytes of "é" in separate tokens.
  const std::vector<RequestOutput> outputs = run(per_byte("r", "café au lait"));
  EXPECT_EQ(joined(outputs), "caf");
  EXPECT_EQ(outputs.back().stop_string, "é");
  add("q", streaming({"è"}));  // Shares é's lead byte, never matches it.
  EXPECT_EQ(joined(run(per_byte("q", "café"))), "café");
}

TEST_F(OutputProcessorTest, StopStringInsideTheFirstToken) {
  add("r", streaming({"world"}));
  const std::vector<RequestOutput> outputs = run({update("r", {kHelloWorld, 'x'})});
  ASSERT_EQ(outputs.size(), 1U);
  EXPECT_EQ(outputs[0].text, "Hello ");
  // The output ends with the token that completed the stop string, as it would one token per
  // step: 'x' (an accepted speculative draft after it) is not the client's.
  EXPECT_EQ(outputs[0].token_ids, (std::vector<std::int32_t>{kHelloWorld}));
  EXPECT_EQ(outputs[0].usage.num_completion_tokens, 1);
  EXPECT_TRUE(outputs[0].finished);
  EXPECT_EQ(aborts_, std::vector<std::string>{"r"});
}

TEST_F(OutputProcessorTest, SkipSpecialTokens) {
  const std::vector<std::int32_t> ids = {'H', 'i', kImStart, '!'};
  OutputOptions skip = streaming();
  add("skip", skip);
  EXPECT_EQ(joined(run({update("skip", ids, RequestStatus::kFinishedLength)})), "Hi!");
  OutputOptions keep = streaming();
  keep.skip_special_tokens = false;
  add("keep", keep);
  EXPECT_EQ(joined(run({update("keep", ids, RequestStatus::kFinishedLength)})), "Hi<|im_start|>!");
}

TEST_F(OutputProcessorTest, StopTokenTextIsLeftOutUnlessIncluded) {
  OutputOptions options = streaming();
  options.skip_special_tokens = false;
  add("r", options);
  std::vector<RequestOutput> outputs =
      run({update("r", {'o', 'k'}), update("r", {'!', kEos}, RequestStatus::kFinishedStopped)});
  EXPECT_EQ(joined(outputs), "ok!");
  EXPECT_EQ(outputs.back().token_ids, (std::vector<std::int32_t>{'!', kEos}));
  EXPECT_EQ(outputs.back().finish_reason(), "stop");
  EXPECT_EQ(outputs.back().stop_token_id, kEos);
  EXPECT_EQ(outputs.back().stop_string, std::nullopt);
  EXPECT_TRUE(aborts_.empty());  // The scheduler finished it itself.

  options.include_stop_str_in_output = true;
  add("q", options);
  outputs = run({update("q", {'o', 'k', kEos}, RequestStatus::kFinishedStopped)});
  EXPECT_EQ(joined(outputs), "ok<|eos|>");
}

TEST_F(OutputProcessorTest, StopStringOutranksLengthInTheSameStep) {
  add("r", streaming({"!"}));
  const std::vector<RequestOutput> outputs =
      run({update("r", bytes_of("hi! there"), RequestStatus::kFinishedLength)});
  EXPECT_EQ(outputs.back().text, "hi");
  EXPECT_EQ(outputs.back().finish_reason(), "stop");
  EXPECT_EQ(outputs.back().stop_string, "!");
  EXPECT_TRUE(aborts_.empty());  // Already finished in the scheduler.
}

TEST_F(OutputProcessorTest, StopStringsWaitForMinTokens) {
  // vLLM's test_min_tokens_with_stop in miniature: text of the first min_tokens tokens is not
  // searched; a match may begin there and end later.
  OutputOptions options = streaming({"e"});
  options.min_tokens = 3;
  add("r", options);
  EXPECT_EQ(joined(run(per_byte("r", "eeexeyy"))), "eeex");
  OutputOptions straddle = streaming({"ab"});
  straddle.min_tokens = 1;
  add("s", straddle);
  EXPECT_EQ(joined(run(per_byte("s", "abz"))), "");
}

TEST_F(OutputProcessorTest, FinalOnlyModeDeliversOneOutputWithEverything) {
  OutputOptions options;
  options.stop = {"zz"};
  add("r", options);
  const std::vector<RequestOutput> outputs = run(per_byte("r", "one two z"));
  ASSERT_EQ(outputs.size(), 1U);
  EXPECT_TRUE(outputs[0].finished);
  EXPECT_EQ(outputs[0].text, "one two z");
  EXPECT_EQ(outputs[0].token_ids, bytes_of("one two z"));
}

TEST_F(OutputProcessorTest, UsageCounts) {
  add("r", streaming());
  const std::vector<RequestOutput> outputs =
      run({update("r", {'a'}), update("r", {'b', 'c'}, RequestStatus::kFinishedLength)});
  EXPECT_EQ(outputs.front().usage.num_completion_tokens, 0);  // Usage comes with the final one.
  const RequestUsage& usage = outputs.back().usage;
  EXPECT_EQ(usage.num_prompt_tokens, kPromptTokens);
  EXPECT_EQ(usage.num_cached_prompt_tokens, kCachedTokens);
  EXPECT_EQ(usage.num_completion_tokens, 3);
}

TEST_F(OutputProcessorTest, TimingsOnAFakeClock) {
  add("r", streaming(), /*arrival=*/10.0);
  SchedulerOutput scheduled;
  ScheduledRequest& r = scheduled.requests.emplace_back();
  r.request_id = "r";
  r.slot = slot("r");
  processor_.record_scheduled(scheduled, 10.5);
  processor_.record_scheduled(scheduled, 10.75);  // Later schedulings do not move queue time.
  processor_.process(std::vector<RequestUpdate>{update("r", {'a'})}, 11.0);
  processor_.process(std::vector<RequestUpdate>{update("r", {'b'})}, 11.25);
  const ProcessedOutputs last = processor_.process(
      std::vector<RequestUpdate>{update("r", {'c', 'd'}, RequestStatus::kFinishedLength)}, 11.75);
  ASSERT_EQ(last.outputs.size(), 1U);
  const RequestTimings& t = last.outputs[0].timings;
  EXPECT_DOUBLE_EQ(t.arrival_time, 10.0);
  EXPECT_DOUBLE_EQ(*t.queue_time(), 0.5);
  EXPECT_DOUBLE_EQ(*t.time_to_first_token(), 1.0);
  EXPECT_EQ(t.inter_token_latencies, (std::vector<double>{0.25, 0.5}));
  EXPECT_DOUBLE_EQ(*t.end_to_end_latency(), 1.75);
  EXPECT_DOUBLE_EQ(*t.time_per_output_token(4), 0.75 / 3);
}

TEST_F(OutputProcessorTest, LogprobsFollowTheirTokens) {
  OutputOptions with = streaming();
  with.num_logprobs = 1;
  add("with", with);
  add("without", streaming());
  const std::vector<RequestUpdate> updates = {update("with", {'a', 'b'}), update("without", {'c'})};
  const std::vector<std::vector<TokenLogprobs>> logprobs = {
      {{'a', -0.5F, {{'a', -0.5F}}}, {'b', -1.5F, {{'z', -0.25F}}}, {'q', -9.0F, {}}},
      {{'c', -0.1F, {}}}};
  const ProcessedOutputs out = processor_.process(updates, 1.0, logprobs);
  ASSERT_EQ(out.outputs.size(), 2U);
  ASSERT_EQ(out.outputs[0].logprobs.size(), 2U);  // The extra (dropped) token is not reported.
  EXPECT_EQ(out.outputs[0].logprobs[1].token_id, 'b');
  EXPECT_FLOAT_EQ(out.outputs[0].logprobs[1].logprob, -1.5F);
  EXPECT_EQ(out.outputs[0].logprobs[1].top,
            (std::vector<std::pair<std::int32_t, float>>{{'z', -0.25F}}));
  EXPECT_TRUE(out.outputs[1].logprobs.empty());
}

TEST_F(OutputProcessorTest, AbortGivesOneFinalOutputWithHeldText) {
  add("r", streaming({"xyz"}));
  std::vector<RequestOutput> outputs = run({update("r", bytes_of("ab x"))});
  EXPECT_EQ(joined(outputs), "ab ");
  const std::optional<RequestOutput> aborted = processor_.abort(slot("r"), 2.0);
  ASSERT_TRUE(aborted.has_value());
  EXPECT_TRUE(aborted->finished);
  EXPECT_EQ(aborted->finish_reason(), "abort");
  EXPECT_EQ(aborted->text, "x");
  EXPECT_EQ(aborted->usage.num_completion_tokens, 4);
  EXPECT_EQ(processor_.abort(slot("r"), 3.0), std::nullopt);  // A late second cancel is harmless.
  EXPECT_EQ(processor_.abort(99, 3.0), std::nullopt);         // never added
  // Aborted while waiting: no tokens, usage from add_request.
  add("waiting", streaming(), 1.0);
  const std::optional<RequestOutput> early = processor_.abort(slot("waiting"), 4.0);
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->usage.num_prompt_tokens, kPromptTokens);
  EXPECT_EQ(early->timings.queue_time(), std::nullopt);
  EXPECT_DOUBLE_EQ(*early->timings.end_to_end_latency(), 3.0);
}

TEST_F(OutputProcessorTest, ExactlyOneFinalOutputPerRequest) {
  add("length", streaming());
  add("eos", streaming());
  add("stop", streaming({"!"}));
  add("quiet", OutputOptions{});
  add("aborted", streaming());
  std::map<std::string, int> finals;
  auto count = [&](const std::vector<RequestOutput>& outputs) {
    for (const RequestOutput& o : outputs) finals[o.request_id] += o.finished ? 1 : 0;
  };
  for (int step = 0; step < 4; ++step) {
    std::vector<RequestUpdate> updates;
    for (const char* id : {"length", "eos", "stop", "quiet", "aborted"}) {
      if (!processor_.has_request(slot(id))) continue;
      const bool last = step == 3;
      if (std::string(id) == "eos" && step == 2) {
        updates.push_back(update(id, {'a', kEos}, RequestStatus::kFinishedStopped));
      } else if (std::string(id) == "stop" && step == 1) {
        updates.push_back(update(id, {'!'}));
      } else {
        updates.push_back(
            update(id, {'a'}, last ? RequestStatus::kFinishedLength : RequestStatus::kRunning));
      }
    }
    const ProcessedOutputs out = processor_.process(updates, 1.0 + step);
    count(out.outputs);
    if (step == 1) {
      const std::optional<RequestOutput> aborted = processor_.abort(slot("aborted"), 2.5);
      ASSERT_TRUE(aborted.has_value());
      count({*aborted});
    }
  }
  EXPECT_EQ(finals, (std::map<std::string, int>{
                        {"aborted", 1}, {"eos", 1}, {"length", 1}, {"quiet", 1}, {"stop", 1}}));
  EXPECT_EQ(processor_.num_requests(), 0U);
}

TEST_F(OutputProcessorTest, InvalidRequestsAreRejected) {
  OutputOptions empty_stop;
  empty_stop.stop = {""};
  EXPECT_EQ(processor_.add_request(0, "a", empty_stop, 1, 0.0).code(),
            StatusCode::kInvalidArgument);
  OutputOptions negative;
  negative.min_tokens = -1;
  EXPECT_EQ(processor_.add_request(0, "a", negative, 1, 0.0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(processor_.num_requests(), 0U);  // a rejected request takes nothing
  EXPECT_TRUE(processor_.add_request(0, "a", {}, 1, 0.0).ok());
  // A reused id is the engine's to refuse (EngineCoreTest.ReusedIdOfALiveRequestIsRefused); a
  // slot given twice without a release is a bug.
  EXPECT_DEATH((void)processor_.add_request(0, "b", {}, 1, 0.0), "slot 0 given to b");
}

TEST_F(OutputProcessorTest, AReusedSlotStartsClean) {
  // "old" leaves text held back by a stop string and a queue time, and ends by a stop string;
  // its slot then goes to "new".
  add_at(0, "old", streaming({"!", "xyz"}), /*arrival=*/1.0);
  SchedulerOutput scheduled;
  ScheduledRequest& s = scheduled.requests.emplace_back();
  s.request_id = "old";
  s.slot = 0;
  processor_.record_scheduled(scheduled, 1.5);
  std::vector<RequestOutput> old =
      run({update("old", bytes_of("ab x")), update("old", {'!'})}, 2.0);
  EXPECT_EQ(joined(old), "ab x");
  EXPECT_EQ(aborts_, std::vector<std::string>{"old"});
  // Finished: no more updates or cancels, but the slot is held until the engine releases it.
  EXPECT_FALSE(processor_.has_request(0));
  EXPECT_EQ(processor_.abort(0, 2.0), std::nullopt);
  EXPECT_DEATH((void)processor_.add_request(0, "early", {}, 1, 2.0), "was not released");
  processor_.release(0);

  add_at(0, "new", streaming(), /*arrival=*/3.0);
  EXPECT_TRUE(processor_.has_request(0));
  EXPECT_EQ(processor_.num_requests(), 1U);
  const std::vector<RequestOutput> outputs =
      run({update("new", bytes_of("xy"), RequestStatus::kFinishedLength)}, 4.0);
  ASSERT_EQ(outputs.size(), 1U);
  const RequestOutput& out = outputs[0];
  EXPECT_EQ(out.request_id, "new");
  EXPECT_EQ(out.text, "xy");  // no held "x" of old's, and old's "xyz" stop is gone
  EXPECT_EQ(out.token_ids, bytes_of("xy"));
  EXPECT_EQ(out.finish_reason(), "length");
  EXPECT_EQ(out.stop_string, std::nullopt);
  EXPECT_EQ(out.usage.num_completion_tokens, 2);
  EXPECT_DOUBLE_EQ(out.timings.arrival_time, 3.0);
  EXPECT_EQ(out.timings.queue_time(), std::nullopt);  // never scheduled: old's 1.5 is not its
  EXPECT_EQ(aborts_, std::vector<std::string>{"old"});

  // Releasing a live request drops it too (the engine does when a step threw midway).
  processor_.release(0);
  add_at(0, "live", streaming());
  processor_.release(0);
  EXPECT_EQ(processor_.num_requests(), 0U);
  EXPECT_FALSE(processor_.has_request(0));
}

TEST_F(OutputProcessorTest, TimeGoingBackwardsIsABug) {
  add("r", streaming(), 5.0);
  EXPECT_DEATH(processor_.process(std::vector<RequestUpdate>{update("r", {'a'})}, 4.0),
               "time went backwards");
}

}  // namespace
}  // namespace pagoda::engine
