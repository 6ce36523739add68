// One engine output as a Generate stream message: the delta's token ids and text, logprobs with
// each token spelled as the HTTP API spells it, and on a sample's final output the finish
// reason, usage and timings.
#pragma once

#include <string_view>

#include "engine/output_channel.h"
#include "pagoda/tokenizer.h"
#include "pagoda/v1/generate.pb.h"

namespace pagoda::grpc {

/// Fills `response` (cleared first) from `item` of request `request_id`.
void fill_generate_response(const engine::StreamOutput& item, std::string_view request_id,
                            const Tokenizer& tokenizer, v1::GenerateResponse& response);

}  // namespace pagoda::grpc
