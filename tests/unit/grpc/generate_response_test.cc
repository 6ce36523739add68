// Engine outputs become Generate stream messages: deltas carry ids, text and logprobs; the final
// message of a sample also carries why it finished, the usage and the timings.
#include "grpc/generate_response.h"

#include <gtest/gtest.h>

#include "../engine/byte_tokenizer_for_test.h"

namespace pagoda::grpc {
namespace {

TEST(GenerateResponse, DeltaCarriesIdsTextAndLogprobs) {
  const std::shared_ptr<const Tokenizer> tokenizer = engine::make_byte_tokenizer();
  engine::StreamOutput item;
  item.index = 1;
  item.output.token_ids = {'h', 'i'};
  item.output.text = "hi";
  item.output.logprobs = {
      {.token_id = 'h', .logprob = -0.5F, .top = {{'h', -0.5F}, {'x', -2.0F}}},
      {.token_id = 'i', .logprob = -0.25F, .top = {{'i', -0.25F}, {'o', -3.F}}}};
  v1::GenerateResponse response;
  response.set_text("stale");  // filling starts from a clear message
  fill_generate_response(item, "req-7", *tokenizer, response);

  EXPECT_EQ(response.request_id(), "req-7");
  EXPECT_EQ(response.index(), 1);
  EXPECT_EQ(std::vector<std::int32_t>(response.token_ids().begin(), response.token_ids().end()),
            (std::vector<std::int32_t>{'h', 'i'}));
  EXPECT_EQ(response.text(), "hi");
  ASSERT_EQ(response.logprobs_size(), 2);
  EXPECT_EQ(response.logprobs(0).token(), "h");
  EXPECT_EQ(response.logprobs(0).token_bytes(), "h");
  EXPECT_FLOAT_EQ(response.logprobs(0).logprob(), -0.5F);
  ASSERT_EQ(response.logprobs(1).top_logprobs_size(), 2);
  EXPECT_EQ(response.logprobs(1).top_logprobs(1).token_id(), 'o');
  EXPECT_EQ(response.logprobs(1).top_logprobs(1).token(), "o");
  EXPECT_FLOAT_EQ(response.logprobs(1).top_logprobs(1).logprob(), -3.F);
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_UNSPECIFIED);
  EXPECT_FALSE(response.has_usage());
  EXPECT_FALSE(response.has_timings());
}

TEST(GenerateResponse, FinalCarriesFinishReasonUsageAndTimings) {
  const std::shared_ptr<const Tokenizer> tokenizer = engine::make_byte_tokenizer();
  engine::StreamOutput item;
  item.output.finished = true;
  item.output.status = engine::RequestStatus::kFinishedStopped;
  item.output.stop_string = "END";
  item.output.usage = {
      .num_prompt_tokens = 5, .num_completion_tokens = 3, .num_cached_prompt_tokens = 4};
  item.output.timings.arrival_time = 10.0;
  item.output.timings.record_scheduled(10.5);
  item.output.timings.record_tokens(11.0);
  item.output.timings.record_finished(12.0);
  v1::GenerateResponse response;
  fill_generate_response(item, "r", *tokenizer, response);

  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_EQ(response.stop_string(), "END");
  EXPECT_EQ(response.usage().prompt_tokens(), 5);
  EXPECT_EQ(response.usage().completion_tokens(), 3);
  EXPECT_EQ(response.usage().cached_prompt_tokens(), 4);
  EXPECT_DOUBLE_EQ(response.timings().queue_seconds(), 0.5);
  EXPECT_DOUBLE_EQ(response.timings().time_to_first_token_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(response.timings().end_to_end_seconds(), 2.0);

  item.output.stop_string.reset();
  item.output.stop_token_id = 2;
  fill_generate_response(item, "r", *tokenizer, response);
  EXPECT_EQ(response.stop_token_id(), 2);

  item.output.status = engine::RequestStatus::kFinishedLength;
  fill_generate_response(item, "r", *tokenizer, response);
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_LENGTH);
  item.output.status = engine::RequestStatus::kFinishedAborted;
  fill_generate_response(item, "r", *tokenizer, response);
  EXPECT_EQ(response.finish_reason(), v1::FINISH_REASON_ABORT);
}

}  // namespace
}  // namespace pagoda::grpc
