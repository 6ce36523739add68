#include "grpc/generate_response.h"

#include "api/token_spelling.h"

namespace pagoda::grpc {

namespace {

v1::FinishReason proto_finish_reason(engine::RequestStatus status) {
  switch (status) {
    case engine::RequestStatus::kFinishedStopped: return v1::FINISH_REASON_STOP;
    case engine::RequestStatus::kFinishedLength: return v1::FINISH_REASON_LENGTH;
    case engine::RequestStatus::kFinishedAborted: return v1::FINISH_REASON_ABORT;
    default: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void fill_logprob(const engine::TokenLogprobs& source, const Tokenizer& tokenizer,
                  v1::TokenLogprob& target) {
  api::TokenSpelling spelling = api::spell_token(tokenizer, source.token_id);
  target.set_token_id(source.token_id);
  target.set_token(std::move(spelling.text));
  target.set_token_bytes(std::move(spelling.bytes));
  target.set_logprob(source.logprob);
  for (const auto& [id, logprob] : source.top) {
    v1::TopLogprob* top = target.add_top_logprobs();
    top->set_token_id(id);
    top->set_token(api::spell_token(tokenizer, id).text);
    top->set_logprob(logprob);
  }
}

void fill_final(const engine::RequestOutput& output, v1::GenerateResponse& response) {
  response.set_finish_reason(proto_finish_reason(output.status));
  if (output.stop_string) {
    response.set_stop_string(*output.stop_string);
  } else if (output.stop_token_id) {
    response.set_stop_token_id(*output.stop_token_id);
  }
  v1::Usage* usage = response.mutable_usage();
  usage->set_prompt_tokens(output.usage.num_prompt_tokens);
  usage->set_completion_tokens(output.usage.num_completion_tokens);
  usage->set_cached_prompt_tokens(output.usage.num_cached_prompt_tokens);
  usage->set_reasoning_tokens(output.usage.num_reasoning_tokens);
  v1::Timings* timings = response.mutable_timings();
  timings->set_queue_seconds(output.timings.queue_time().value_or(0.0));
  timings->set_time_to_first_token_seconds(output.timings.time_to_first_token().value_or(0.0));
  timings->set_end_to_end_seconds(output.timings.end_to_end_latency().value_or(0.0));
}

}  // namespace

void fill_generate_response(const engine::StreamOutput& item, std::string_view request_id,
                            const Tokenizer& tokenizer, v1::GenerateResponse& response) {
  response.Clear();
  const engine::RequestOutput& output = item.output;
  response.set_request_id(std::string(request_id));
  response.set_index(item.index);
  response.mutable_token_ids()->Add(output.token_ids.begin(), output.token_ids.end());
  response.set_text(output.text);
  response.set_reasoning_text(output.reasoning_text);
  for (const engine::TokenLogprobs& logprobs : output.logprobs) {
    fill_logprob(logprobs, tokenizer, *response.add_logprobs());
  }
  for (const engine::TokenLogprobs& logprobs : output.prompt_logprobs) {
    fill_logprob(logprobs, tokenizer, *response.add_prompt_logprobs());
  }
  if (output.finished) fill_final(output, response);
}

}  // namespace pagoda::grpc
